package placement

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// The fixtures are a Deployment as a team writes it, as a server-side dry-run create defaults
// it, and as it lives after Flux's kustomize-controller applied it (server-side apply, with its
// own labels) and the Deployment controller took it up. Their managedFields have the shapes
// `kubectl get -o yaml --show-managed-fields` shows.

const webFile = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - containerPort: 80
        env:
        - name: MODE
          value: prod
        - name: LOG_LEVEL
          value: info
        resources:
          requests:
            cpu: 500m
            memory: 256Mi
`

// webBaseline is webFile as the apiserver defaults it, through sanitize.Object.
const webBaseline = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
spec:
  progressDeadlineSeconds: 600
  replicas: 2
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      app: web
  strategy:
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 25%
    type: RollingUpdate
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.27
        imagePullPolicy: IfNotPresent
        ports:
        - containerPort: 80
          protocol: TCP
        env:
        - name: MODE
          value: prod
        - name: LOG_LEVEL
          value: info
        resources:
          requests:
            cpu: 500m
            memory: 256Mi
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
`

// webLiveExtra is what the live object has besides webBaseline: Flux's labels, the Deployment
// controller's annotation and status, and the managed fields of both.
const webLiveExtra = `
metadata:
  labels:
    kustomize.toolkit.fluxcd.io/name: apps
    kustomize.toolkit.fluxcd.io/namespace: flux-system
  annotations:
    deployment.kubernetes.io/revision: "1"
  uid: 0b6c5a3e-3f7e-4a55-9d0e-2f1c8d1f6a10
  resourceVersion: "48213"
  generation: 1
  creationTimestamp: "2025-03-01T10:00:00Z"
  managedFields:
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels:
          f:app: {}
          f:kustomize.toolkit.fluxcd.io/name: {}
          f:kustomize.toolkit.fluxcd.io/namespace: {}
      f:spec:
        f:replicas: {}
        f:selector: {}
        f:template:
          f:metadata:
            f:labels:
              f:app: {}
          f:spec:
            f:containers:
              k:{"name":"web"}:
                .: {}
                f:env:
                  k:{"name":"LOG_LEVEL"}:
                    .: {}
                    f:name: {}
                    f:value: {}
                  k:{"name":"MODE"}:
                    .: {}
                    f:name: {}
                    f:value: {}
                f:image: {}
                f:name: {}
                f:ports:
                  k:{"containerPort":80,"protocol":"TCP"}:
                    .: {}
                    f:containerPort: {}
                f:resources:
                  f:requests:
                    f:cpu: {}
                    f:memory: {}
    manager: kustomize-controller
    operation: Apply
    time: "2025-03-01T10:00:00Z"
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:annotations:
          .: {}
          f:deployment.kubernetes.io/revision: {}
    manager: kube-controller-manager
    operation: Update
    time: "2025-03-01T10:00:01Z"
  - apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:status:
        f:availableReplicas: {}
        f:observedGeneration: {}
        f:readyReplicas: {}
        f:replicas: {}
        f:updatedReplicas: {}
    manager: kube-controller-manager
    operation: Update
    subresource: status
    time: "2025-03-01T10:00:05Z"
status:
  availableReplicas: 2
  observedGeneration: 1
  readyReplicas: 2
  replicas: 2
  updatedReplicas: 2
`

// fixtureModel is one case: the file's object, its baseline and the live object as read from the
// cluster (managedFields, status and all), which the cases change as a person or a controller
// would.
type fixtureModel struct {
	file, baseline, live map[string]any
}

// webModel is the Deployment fixtureModel with nothing changed by anyone since Flux applied it.
func webModel(t *testing.T) fixtureModel {
	t.Helper()
	baseline := object(t, webBaseline)
	live := merge(object(t, webBaseline), object(t, webLiveExtra))
	return fixtureModel{file: object(t, webFile), baseline: baseline, live: live}
}

// changes runs Changes as the watch side would: both objects through sanitize.Object, the owners
// read from the raw live object with DefaultPerson.
func (f fixtureModel) changes() []Op {
	return Changes(f.file, sanitize.Object(f.baseline), sanitize.Object(f.live), f.owners())
}

func (f fixtureModel) owners() Owners {
	return OwnersOf(managedOf(f.live), DefaultPerson)
}

// managedOf is an object's metadata.managedFields.
func managedOf(obj map[string]any) []any {
	meta, _ := obj["metadata"].(map[string]any)
	managed, _ := meta["managedFields"].([]any)
	return managed
}

// write adds entries (a YAML list of managedFields entries) to obj's managed fields.
func write(t *testing.T, obj map[string]any, entries string) {
	t.Helper()
	meta := obj["metadata"].(map[string]any)
	list := object(t, "managedFields:\n"+entries)["managedFields"].([]any)
	meta["managedFields"] = append(managedOf(obj), list...)
}

// disown removes from the field set of every entry of manager the field at path (fieldsV1 keys,
// f:spec f:replicas), and the nodes it leaves empty: what the apiserver does to the previous
// owners of a field an Update changes.
func disown(obj map[string]any, manager string, path ...string) {
	for _, e := range managedOf(obj) {
		entry := e.(map[string]any)
		if entry["manager"] == manager {
			removeField(entry["fieldsV1"].(map[string]any), path)
		}
	}
}

func removeField(set map[string]any, path []string) {
	if len(path) == 1 {
		delete(set, path[0])
		return
	}
	below, ok := set[path[0]].(map[string]any)
	if !ok {
		return
	}
	removeField(below, path[1:])
	if len(below) == 0 || len(below) == 1 && below["."] != nil {
		delete(set, path[0])
	}
}

// object reads one YAML document as ObjectOf does.
func object(t *testing.T, text string) map[string]any {
	t.Helper()
	docs, err := sanitize.Documents([]byte(text))
	if err != nil || len(docs) != 1 {
		t.Fatalf("fixtureModel: %d documents, %v", len(docs), err)
	}
	obj, err := sanitize.ObjectOf(docs[0])
	if err != nil {
		t.Fatalf("fixtureModel: %v", err)
	}
	return obj
}

// merge puts extra's fields into obj, mapping into mapping, and returns obj.
func merge(obj, extra map[string]any) map[string]any {
	for k, v := range extra {
		if m, ok := v.(map[string]any); ok {
			if into, ok := obj[k].(map[string]any); ok {
				merge(into, m)
				continue
			}
		}
		obj[k] = v
	}
	return obj
}

// at is the mapping at steps in obj: fields, or name=value for a named list's item.
func at(t *testing.T, obj map[string]any, steps ...string) map[string]any {
	t.Helper()
	var cur any = obj
	for _, s := range steps {
		if match, value, ok := strings.Cut(s, "="); ok {
			cur, _ = resolve(cur, Step{Match: match, Value: canonical(value)})
		} else {
			cur = cur.(map[string]any)[s]
		}
		if cur == nil {
			t.Fatalf("fixtureModel: nothing at %s", s)
		}
	}
	return cur.(map[string]any)
}

func TestPathReadsWhatStringWrites(t *testing.T) {
	for _, text := range []string{"spec.template.spec.containers[name=web].ports[containerPort=80].name", "spec.args[3]", "metadata.labels.app"} {
		if got := pathOf(text).String(); got != text {
			t.Errorf("pathOf(%q).String() = %q", text, got)
		}
	}
	if p := pathOf("a[3]"); p[1] != (Step{Index: 3}) {
		t.Errorf("pathOf(a[3]) = %#v", p)
	}
}

// path reads a path as Path.String writes it; a Value that is a number is an int64.
func pathOf(text string) Path {
	var p Path
	for text != "" {
		if text[0] == '[' {
			end := strings.IndexByte(text, ']')
			match, value, named := strings.Cut(text[1:end], "=")
			if !named {
				i, _ := strconv.Atoi(match)
				p = append(p, Step{Index: i})
				text = strings.TrimPrefix(text[end+1:], ".")
				continue
			}
			var v any = value
			if n, err := strconv.ParseInt(value, 10, 64); err == nil {
				v = n
			}
			p = append(p, Step{Match: match, Value: v})
			text = strings.TrimPrefix(text[end+1:], ".")
			continue
		}
		end := strings.IndexAny(text, ".[")
		if end < 0 {
			end = len(text)
		}
		p = append(p, Step{Field: text[:end]})
		text = strings.TrimPrefix(text[end:], ".")
	}
	return p
}

// opsText writes ops one a line, as the tests compare them: set path = JSON, or remove path.
func opsText(ops []Op) string {
	var b strings.Builder
	for _, op := range ops {
		if op.Remove {
			b.WriteString("remove " + op.Path.String() + "\n")
			continue
		}
		v, _ := json.Marshal(op.Value)
		b.WriteString("set " + op.Path.String() + " = " + string(v) + "\n")
	}
	return b.String()
}
