package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// none fills a cell that has no value, as kubectl's custom columns do.
const none = "<none>"

// oneLine keeps a cell on its line.
var oneLine = strings.NewReplacer("\t", " ", "\r\n", " ", "\n", " ")

// table writes rows of tab-separated cells aligned in columns, with an UPPERCASE header, as
// kubectl get does.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 10, 4, 3, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = none
		}
		cells[i] = oneLine.Replace(c) // a tab or a newline in a message would break the columns
	}
	_, _ = fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// printObjects writes objects as YAML or JSON, as kubectl get -o does: the object itself when
// one was asked for by name, else a List of them. Managed fields are left out, as kubectl does.
func printObjects(w io.Writer, output string, objs []unstructured.Unstructured, single bool) error {
	items := make([]any, len(objs))
	for i := range objs {
		obj := objs[i].DeepCopy()
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
		items[i] = obj.Object
	}
	var v any = map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
	if single && len(items) == 1 {
		v = items[0]
	}
	var out []byte
	var err error
	if output == outputJSON {
		out, err = json.MarshalIndent(v, "", "    ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("encode as %s: %w", output, err)
	}
	_, err = w.Write(out)
	return err
}

// age is how long ago t was, as kubectl's AGE column says it ("5m", "3d").
func age(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return duration.HumanDuration(time.Since(t))
}

// ageOf is age for a time a status may not have: "" when it is nil.
func ageOf(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return age(t.Time)
}

// condition is the status and reason of the condition of type typ, "" when there is none.
func condition(conds []metav1.Condition, typ string) (status, reason, message string) {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return "", "", ""
	}
	return string(c.Status), c.Reason, c.Message
}
