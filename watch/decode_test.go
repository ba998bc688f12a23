package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configbutler/gitops-reverser/sanitize"
)

// canonicalBy is the canonical JSON of obj as the mirror hashes it, and what it keeps of its
// managers (noise filters read them).
func canonicalBy(t *testing.T, obj map[string]any) (string, []string) {
	t.Helper()
	canon, err := sanitize.JSON(sanitize.Object(obj))
	if err != nil {
		t.Fatal(err)
	}
	return string(canon), newestManagers(&unstructured.Unstructured{Object: obj})
}

// TestDecodeObjectIsClientGos: an object read once by decodeObject has the canonical JSON, the
// hash and so the admission match, and the newest managers that client-go's decoder gives it,
// for the corners of JSON: integers as int64 up to its limits and floats past them, exponents,
// escapes and non-ASCII, invalid UTF-8, a repeated name, null, nesting, arrays of objects.
func TestDecodeObjectIsClientGos(t *testing.T) {
	docs := []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"7",` +
			`"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:x":{}}}},` +
			`{"manager":"helm","operation":"Update","time":"2026-01-02T00:00:00Z","fieldsV1":{}}]},` +
			`"data":{"x":"line\nbreak \u00e9\u0000 \"q\" \\ \/ \ud83d\ude00 ✓","empty":""},"status":{"phase":"Active","n":3}}`,
		`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"a":"b"},"annotations":{}},` +
			`"spec":{"ints":[0,-1,9223372036854775807,-9223372036854775808,9223372036854775808,-9223372036854775809],` +
			`"floats":[1.5,-0.0,1e3,1E-7,2.0,123456789012345678901234567890,0.1e1],` +
			`"mixed":[null,true,false,"s",[],{},[[{"deep":[{"x":1}]}]]],"null":null,"dup":1,"dup":2}}`,
		"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"bad\xff\xfeutf8\"},\"data\":{\"k\":\"\xc3\x28\"}}",
		`{"kind":"Service","apiVersion":"v1","metadata":{"name":"s","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"r","uid":"x","controller":true}]},` +
			`"spec":{"clusterIP":"10.0.0.1","clusterIPs":["10.0.0.1"],"ports":[{"port":80,"targetPort":8080}]}}`,
	}
	for _, doc := range docs {
		want, err := runtime.Decode(unstructured.UnstructuredJSONScheme, []byte(doc))
		if err != nil {
			t.Fatalf("client-go decode %s: %v", doc, err)
		}
		got, err := decodeObject(newDecoder(strings.NewReader(doc)), false)
		if err != nil {
			t.Fatalf("decodeObject %s: %v", doc, err)
		}
		wantJSON, wantManagers := canonicalBy(t, want.(*unstructured.Unstructured).Object)
		gotJSON, gotManagers := canonicalBy(t, got)
		if gotJSON != wantJSON {
			t.Errorf("canonical JSON of %s:\n got %s\nwant %s", doc, gotJSON, wantJSON)
		}
		if strings.Join(gotManagers, ",") != strings.Join(wantManagers, ",") {
			t.Errorf("newest managers of %s: got %v, want %v", doc, gotManagers, wantManagers)
		}
		if _, ok := got["status"]; ok {
			t.Errorf("status of %s was built", doc)
		}
		if m, _ := got["metadata"].(map[string]any); m != nil {
			for _, e := range asSlice(m["managedFields"]) {
				if _, ok := e.(map[string]any)["fieldsV1"]; ok {
					t.Errorf("fieldsV1 of %s was built", doc)
				}
			}
		}
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// TestDecodeObjectRefusesBrokenJSON: a document cut short or not JSON is an error, never a
// partial object taken for the whole.
func TestDecodeObjectRefusesBrokenJSON(t *testing.T) {
	for _, doc := range []string{``, `{`, `{"a":`, `{"a":[1,2`, `{"a":1,}`, `[1]`, `{"a":01}`, `{"a":tru}`, `"x"`} {
		if obj, err := decodeObject(newDecoder(strings.NewReader(doc)), false); err == nil {
			t.Errorf("decodeObject(%q) = %v, want an error", doc, obj)
		}
	}
}

// TestListAndWatchReadWhatTheDynamicClientReads: over a real apiserver, the items of a list (its
// built-in items carry no kind) and the objects of watch events decode to what client-go's dynamic
// client makes of them, page by page. (TestExpiredWatchRelistsAndFindsMissedDeletes has a watch
// that resumes too late get the apiserver's 410 and re-list.)
func TestListAndWatchReadWhatTheDynamicClientReads(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, name := range []string{"one", "two", "three"} {
		e.configMap(name, map[string]string{"k": name, "n": "1.50"})
	}
	replicas := int32(2)
	_, err := e.kube.AppsV1().Deployments(e.ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := streamClient(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap"},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment"}} {
		want, err := e.resource(c.gvr, e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := newCollection(client, c.gvr, c.kind, e.ns)
		var got []map[string]any
		opts := listOptions{limit: 2}
		pages := 0
		for {
			_, next, err := r.list(ctx, opts, func(o *unstructured.Unstructured) error {
				got = append(got, o.Object)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if next == "" {
				break
			}
			opts.continueToken = next
		}
		if len(got) != len(want.Items) || len(want.Items) > 2 && pages < 2 {
			t.Fatalf("%s: read %d items in %d pages, want %d in pages of 2", c.gvr.Resource, len(got), pages, len(want.Items))
		}
		for i := range got {
			gotJSON, _ := canonicalBy(t, got[i])
			wantJSON, _ := canonicalBy(t, want.Items[i].Object)
			if gotJSON != wantJSON || !strings.Contains(gotJSON, `"kind":"`+c.kind+`"`) {
				t.Errorf("%s item %d:\n got %s\nwant %s", c.gvr.Resource, i, gotJSON, wantJSON)
			}
		}
	}

	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	r := newCollection(client, cms, "ConfigMap", e.ns)
	rv, _, err := r.list(ctx, listOptions{}, func(*unstructured.Unstructured) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	stream, err := r.watch(ctx, listOptions{resourceVersion: rv, timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	e.configMap("four", map[string]string{"k": "four"})
	typ, obj, err := stream.next()
	if err != nil || typ != watch.Added || obj.GetName() != "four" || obj.GetResourceVersion() == "" {
		t.Fatalf("first event: %v %v %v", typ, obj, err)
	}
	want, err := e.resource(cms, e.ns).Get(ctx, "four", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := canonicalBy(t, obj.Object)
	if w, _ := canonicalBy(t, want.Object); g != w {
		t.Errorf("watched object:\n got %s\nwant %s", g, w)
	}
}

// BenchmarkDecodeList: a page of 500 ConfigMaps of 1 KiB, as the apiserver lists them, read by
// client-go's decoder (what the mirror did before) and by decodeObject.
func BenchmarkDecodeList(b *testing.B) {
	items := make([]any, 500)
	for i := range items {
		items[i] = map[string]any{"metadata": map[string]any{"name": "cm", "namespace": "ns", "uid": "6c1e4f1d-8a2e-4bd4-9c55-0d3f3b9d2e11",
			"resourceVersion": "12345", "creationTimestamp": "2026-01-01T00:00:00Z",
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
				"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:data": map[string]any{".": map[string]any{}, "f:payload": map[string]any{}}}}}},
			"data": map[string]any{"payload": strings.Repeat("0001-0 ", 146)}}
	}
	page, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMapList", "metadata": map[string]any{"resourceVersion": "1"}, "items": items})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("client-go", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := runtime.Decode(unstructured.UnstructuredJSONScheme, page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeObject", func(b *testing.B) {
		r := collection{apiVersion: "v1", kind: "ConfigMap"}
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			dec := newDecoder(bytes.NewReader(page))
			if _, err := dec.ReadToken(); err != nil {
				b.Fatal(err)
			}
			for dec.PeekKind() == '"' {
				name, _ := dec.ReadToken()
				if name.String() != "items" {
					if err := dec.SkipValue(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if err := r.items(dec, func(*unstructured.Unstructured) error { return nil }); err != nil && !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestAWatchStreamEndsCleanlyOrWithAnError: the apiserver ending a watch between two events is
// io.EOF (the watcher resumes from the last resourceVersion), a stream cut in the middle of an
// event is an error and never an event, and an ERROR event is the apiserver's Status.
func TestAWatchStreamEndsCleanlyOrWithAnError(t *testing.T) {
	stream := func(text string) *eventStream {
		return &eventStream{body: io.NopCloser(strings.NewReader(text)), dec: newDecoder(strings.NewReader(text))}
	}
	s := stream(`{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"}}}` + "\n" +
		`{"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"9"}}}` + "\n")
	for _, want := range []string{"ADDED 7", "BOOKMARK 9"} {
		typ, obj, err := s.next()
		if err != nil || fmt.Sprint(typ, " ", obj.GetResourceVersion()) != want {
			t.Fatalf("event: %v %v %v, want %s", typ, obj, err, want)
		}
	}
	if _, _, err := s.next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}
	if typ, obj, err := stream(`{"type":"MODIFIED","object":{"kind":"ConfigMap","metadata":{"na`).next(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a stream cut inside an event: %v %v %v, want an error that is not io.EOF", typ, obj, err)
	}
	_, _, err := stream(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"too old"}}`).next()
	if !isExpired(err) {
		t.Errorf("an ERROR event of 410: %v, want the apiserver's Status", err)
	}
}

func isExpired(err error) bool {
	var status interface{ Status() metav1.Status }
	return errors.As(err, &status) && status.Status().Code == 410 && status.Status().Reason == metav1.StatusReasonExpired
}
