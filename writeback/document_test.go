package writeback

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// docConfigMap is a minimal valid object; tests append to it or wrap it.
const docConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: default\n"

// docWantRefused fails t unless err is a *Refused with the given reason.
func docWantRefused(t *testing.T, err error, reason string) {
	t.Helper()
	var r *Refused
	if !errors.As(err, &r) {
		t.Fatalf("error = %v (%T), want a *Refused with reason %s", err, err, reason)
	}
	if r.Reason != reason {
		t.Fatalf("reason = %s (%v), want %s", r.Reason, r, reason)
	}
	if !strings.HasPrefix(r.Error(), reason+": ") || r.Message == "" {
		t.Errorf("Error() = %q, want %q and a message", r.Error(), reason+": ...")
	}
}

// docNested is a ConfigMap whose data value is levels-1 nested sequences, so that the file nests
// levels collections deep (the top-level mapping is level 1, data level 2).
func docNested(levels int) string {
	k := levels - 2
	return docConfigMap + "data:\n  x: " + strings.Repeat("[", k) + strings.Repeat("]", k) + "\n"
}

// docPadded is docConfigMap followed by a comment that makes the file exactly size bytes.
func docPadded(size int) string {
	pad := size - len(docConfigMap) - len("#\n")
	return docConfigMap + "#" + strings.Repeat("x", pad) + "\n"
}

func TestParseDocumentRefuses(t *testing.T) {
	cases := []struct {
		name, in, reason string
	}{
		{"one byte over the cap", docPadded(MaxDocumentBytes + 1), ReasonTooLarge},

		{"two objects", docConfigMap + "---\n" + docConfigMap, ReasonMultiDocument},
		{"an object after an empty document", docConfigMap + "---\n---\n" + docConfigMap, ReasonMultiDocument},
		{"an explicit null document", docConfigMap + "--- null\n", ReasonMultiDocument},
		{"a scalar document", docConfigMap + "---\nhello\n", ReasonMultiDocument},
		{"an empty document before the object", "---\n---\n" + docConfigMap, ReasonMultiDocument},

		{"unclosed flow sequence", docConfigMap + "data: [a, b\n", ReasonUnparseable},
		{"tab indentation", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: web\n", ReasonUnparseable},
		{"broken second document", docConfigMap + "---\n[unclosed\n", ReasonUnparseable},
		{"duplicate key", docConfigMap + "data: {}\ndata: {}\n", ReasonUnparseable},
		{"integer key", docConfigMap + "data:\n  1: one\n", ReasonUnparseable},
		{"boolean key", docConfigMap + "data:\n  true: one\n", ReasonUnparseable},
		{"null key", docConfigMap + "data:\n  ~: one\n", ReasonUnparseable},
		{"mapping as a key", docConfigMap + "data:\n  ? {a: 1}\n  : one\n", ReasonUnparseable},
		{"NaN has no JSON", docConfigMap + "spec:\n  x: .nan\n", ReasonUnparseable},
		{"infinity has no JSON", docConfigMap + "spec:\n  x: -.inf\n", ReasonUnparseable},
		{"invalid UTF-8", docConfigMap + "data:\n  x: \xff\xfe\n", ReasonUnparseable},

		{"anchor without an alias", docConfigMap + "data: &d\n  x: y\n", ReasonAlias},
		{"anchor on a scalar", docConfigMap + "data:\n  x: &x y\n", ReasonAlias},
		{"alias", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n web\ndata:\n  x: *n\n", ReasonAlias},
		{"alias as a key", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n web\ndata:\n  *n : x\n", ReasonAlias},
		{"merge key", docConfigMap + "data:\n  <<: {x: y}\n", ReasonAlias},
		{"anchor on the document", "--- &doc\n" + docConfigMap, ReasonAlias},

		{"one level too deep", docNested(MaxDocumentDepth + 1), ReasonTooDeep},
		{"deep block mappings", docConfigMap + "spec:\n" + docBlockNesting(MaxDocumentDepth), ReasonTooDeep},
		{"deeper than the parser goes", docNested(20000), ReasonTooDeep},

		{"empty file", "", ReasonNotAnObject},
		{"only a comment", "# nothing here\n", ReasonNotAnObject},
		{"only a document marker", "---\n", ReasonNotAnObject},
		{"a list", "- " + strings.ReplaceAll(docConfigMap, "\n", "\n  "), ReasonNotAnObject},
		{"a scalar", "hello\n", ReasonNotAnObject},
		{"no apiVersion", "kind: ConfigMap\nmetadata:\n  name: web\n", ReasonNotAnObject},
		{"empty apiVersion", "apiVersion: \"\"\nkind: ConfigMap\nmetadata:\n  name: web\n", ReasonNotAnObject},
		{"apiVersion with two slashes", "apiVersion: a/b/c\nkind: ConfigMap\nmetadata:\n  name: web\n", ReasonNotAnObject},
		{"no kind", "apiVersion: v1\nmetadata:\n  name: web\n", ReasonNotAnObject},
		{"kind not a string", "apiVersion: v1\nkind: 7\nmetadata:\n  name: web\n", ReasonNotAnObject},
		{"no metadata", "apiVersion: v1\nkind: ConfigMap\n", ReasonNotAnObject},
		{"metadata a list", "apiVersion: v1\nkind: ConfigMap\nmetadata: [web]\n", ReasonNotAnObject},
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: default\n", ReasonNotAnObject},
		{"empty name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"\"\n", ReasonNotAnObject},
		{"numeric name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 42\n", ReasonNotAnObject},
		{"namespace not a string", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: [a]\n", ReasonNotAnObject},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc, err := ParseDocument([]byte(c.in))
			if doc != nil {
				t.Errorf("document = %v, want none", doc.Object)
			}
			docWantRefused(t, err, c.reason)
		})
	}
}

// docBlockNesting is levels block mappings, one in another, indented below a key.
func docBlockNesting(levels int) string {
	var b strings.Builder
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "%sk%d:\n", strings.Repeat("  ", i), i)
	}
	return b.String()
}

func TestParseDocumentAccepts(t *testing.T) {
	cases := []struct {
		name, in string
	}{
		{"plain", docConfigMap},
		{"leading document marker", "--- \n" + docConfigMap},
		{"leading marker and comment", "# owned by team a\n---\n" + docConfigMap},
		{"trailing document marker", docConfigMap + "---\n"},
		{"trailing empty documents and comments", docConfigMap + "---\n# nothing\n---\n"},
		{"document end marker", docConfigMap + "...\n"},
		{"exactly the cap", docPadded(MaxDocumentBytes)},
		{"exactly the deepest nesting", docNested(MaxDocumentDepth)},
		{"quoted << is a plain key", docConfigMap + "data:\n  \"<<\": x\n"},
		{"windows line endings", strings.ReplaceAll(docConfigMap, "\n", "\r\n")},
		{"byte order mark", "\ufeff" + docConfigMap},
		{"comments everywhere", "# head\napiVersion: v1 # core\nkind: ConfigMap\nmetadata: # meta\n  name: web\n  namespace: default\n# foot\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc, err := ParseDocument([]byte(c.in))
			if err != nil {
				t.Fatalf("ParseDocument: %v", err)
			}
			o := doc.Object
			if o.GetAPIVersion() != "v1" || o.GetKind() != "ConfigMap" || o.GetNamespace() != "default" || o.GetName() != "web" {
				t.Errorf("object = %s %s %s/%s, want v1 ConfigMap default/web", o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName())
			}
		})
	}
}

// docLaughs is a "billion laughs" file: level i is a list of ten aliases of level i-1, so the
// last level expands to 10^levels strings.
func docLaughs(levels int) string {
	var b strings.Builder
	b.WriteString(docConfigMap + "spec:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestParseDocumentRefusesAnAliasBombCheaply(t *testing.T) {
	for _, levels := range []int{9, 30} { // 10^9 and 10^30 strings once expanded
		t.Run(fmt.Sprintf("%d levels", levels), func(t *testing.T) {
			in := []byte(docLaughs(levels))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := ParseDocument(in)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			docWantRefused(t, err, ReasonAlias)
			// Parsing a file this small into nodes allocates a few hundred KiB at most;
			// expanding it would take gigabytes (or forever).
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
				t.Errorf("allocated %d bytes for a %d-byte file", alloc, len(in))
			}
			if took > 2*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// docDeploymentJSON is a Deployment as the apiserver returns it: server-owned fields, integers,
// a float in a custom field, nulls and empty maps.
const docDeploymentJSON = `{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {
    "name": "web",
    "namespace": "team-a",
    "uid": "5f0c6d8e-0000-4000-8000-000000000001",
    "resourceVersion": "12345",
    "generation": 4,
    "creationTimestamp": "2024-01-02T03:04:05Z",
    "labels": {"app": "web", "on": "yes"},
    "annotations": {
      "deployment.kubernetes.io/revision": "3",
      "example.com/ratio": "0.5",
      "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"apps/v1\"}\n"
    },
    "managedFields": [{"manager": "kubectl", "operation": "Apply", "time": "2024-01-02T03:04:05Z"}]
  },
  "spec": {
    "replicas": 3,
    "revisionHistoryLimit": 10,
    "progressDeadlineSeconds": 600,
    "selector": {"matchLabels": {"app": "web"}},
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
    "template": {
      "metadata": {"labels": {"app": "web"}},
      "spec": {
        "terminationGracePeriodSeconds": 30,
        "containers": [{
          "name": "web",
          "image": "nginx:1.27",
          "args": ["--port=8080", "--verbose", "true", "1e3", "0x10", "~", ""],
          "ports": [{"containerPort": 8080, "protocol": "TCP"}],
          "env": [{"name": "SCRIPT", "value": "line one\nline two\n"}, {"name": "EMPTY", "value": ""}],
          "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": 0.25}}
        }],
        "securityContext": {"runAsUser": 9223372036854775807, "fsGroup": 2000},
        "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 1.5}]
      }
    }
  },
  "status": {"replicas": 3, "readyReplicas": 3, "observedGeneration": 4}
}`

// docDeploymentYAML is the same Deployment as a person would write it: other key order,
// comments, flow style, quoting of their own choosing.
const docDeploymentYAML = `# the web frontend
apiVersion: apps/v1
kind: Deployment
metadata:
  namespace: team-a
  name: web
  labels: {app: web, "on": "yes"}
  annotations:
    example.com/ratio: "0.5"
spec:
  replicas: 3   # three is enough
  selector:
    matchLabels:
      app: web
  revisionHistoryLimit: 10
  progressDeadlineSeconds: 600
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 1}
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 30
      containers:
      - name: web
        image: "nginx:1.27"
        args: ["--port=8080", '--verbose', "true", "1e3", "0x10", "~", ""]
        ports:
        - {containerPort: 8080, protocol: TCP}
        env:
        - name: SCRIPT
          value: |
            line one
            line two
        - name: EMPTY
          value: ""
        resources:
          limits: {cpu: 500m, memory: 128Mi}
          requests:
            cpu: 0.25
      securityContext:
        runAsUser: 9223372036854775807
        fsGroup: 2000
      tolerations:
      - key: k
        operator: Exists
        tolerationSeconds: 1.5
`

func TestParseDocumentDecodesLikeTheDynamicClient(t *testing.T) {
	live := &unstructured.Unstructured{}
	if err := live.UnmarshalJSON([]byte(docDeploymentJSON)); err != nil {
		t.Fatal(err)
	}
	want := sanitize.Object(live.Object)
	wantYAML, err := sanitize.YAML(want)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, file string }{
		{"the file the mirror wrote", string(wantYAML)},
		{"a file a person wrote", docDeploymentYAML},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc, err := ParseDocument([]byte(c.file))
			if err != nil {
				t.Fatalf("ParseDocument: %v", err)
			}
			got := sanitize.Object(doc.Object.Object)
			// cmp tells int64 from float64 and int: the types must be the dynamic client's.
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("object differs from the live one (-live +file):\n%s", diff)
			}
			gotYAML, err := sanitize.YAML(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(gotYAML) != string(wantYAML) {
				t.Errorf("canonical YAML differs:\n%s", UnifiedDiff(wantYAML, gotYAML, "live", "file"))
			}
			replicas, _, _ := unstructured.NestedFieldNoCopy(doc.Object.Object, "spec", "replicas")
			if _, ok := replicas.(int64); !ok {
				t.Errorf("spec.replicas is a %T, want int64", replicas)
			}
		})
	}
}

// docObject is an object with just its identity.
func docObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

func TestCheckPath(t *testing.T) {
	const base = "clusters/prod"
	long := strings.Repeat("a", 300)
	longPath := layout.Path(base, "", "configmaps", "default", long)
	cases := []struct {
		name     string
		path     string
		obj      *unstructured.Unstructured
		resource string
		reason   string // "" when accepted
		message  string // part of the refusal's message
	}{
		{"deployment", base + "/team-a/deployments.apps/web.yaml", docObject("apps/v1", "Deployment", "team-a", "web"), "deployments", "", ""},
		{"other API version of the group", base + "/team-a/deployments.apps/web.yaml", docObject("apps/v1beta2", "Deployment", "team-a", "web"), "deployments", "", ""},
		{"escaped cluster-scoped name", base + "/_cluster/clusterroles.rbac.authorization.k8s.io/system%3Acontroller%3Ax.yaml",
			docObject("rbac.authorization.k8s.io/v1", "ClusterRole", "", "system:controller:x"), "clusterroles", "", ""},
		{"shortened name", longPath, docObject("v1", "ConfigMap", "default", long), "configmaps", "", ""},
		{"secrets of another group", base + "/team-a/secrets.example.com/web.yaml", docObject("example.com/v1", "Secret", "team-a", "web"), "secrets", "", ""},

		{"outside the base folder", "clusters/staging/team-a/deployments.apps/web.yaml", docObject("apps/v1", "Deployment", "team-a", "web"), "deployments", ReasonOutsideFolder, "outside the base folder"},
		{"base folder as a prefix only", base + "-old/team-a/deployments.apps/web.yaml", docObject("apps/v1", "Deployment", "team-a", "web"), "deployments", ReasonOutsideFolder, ""},
		{"a README", base + "/README.md", docObject("apps/v1", "Deployment", "team-a", "web"), "deployments", ReasonPathMismatch, "not an object path"},
		{"not canonically escaped", base + "/_cluster/clusterroles.rbac.authorization.k8s.io/system%3acontroller%3ax.yaml",
			docObject("rbac.authorization.k8s.io/v1", "ClusterRole", "", "system:controller:x"), "clusterroles", ReasonPathMismatch, "not an object path"},
		{"other namespace", base + "/team-b/deployments.apps/web.yaml", docObject("apps/v1", "Deployment", "team-a", "web"), "deployments", ReasonPathMismatch,
			`namespace: path says "team-b", object says "team-a"`},
		{"namespaced object in the cluster folder", base + "/_cluster/deployments.apps/web.yaml", docObject("apps/v1", "Deployment", "team-a", "web"), "deployments", ReasonPathMismatch,
			`namespace: path says "", object says "team-a"`},
		{"other name", base + "/team-a/deployments.apps/api.yaml", docObject("apps/v1", "Deployment", "team-a", "web"), "deployments", ReasonPathMismatch,
			`name: path says "api", object says "web"`},
		{"other group", base + "/team-a/deployments.apps/web.yaml", docObject("extensions/v1beta1", "Deployment", "team-a", "web"), "deployments", ReasonPathMismatch,
			`group: path says "apps", object says "extensions"`},
		{"other resource", base + "/team-a/deployments.apps/web.yaml", docObject("apps/v1", "StatefulSet", "team-a", "web"), "statefulsets", ReasonPathMismatch,
			`resource: path says "deployments", object says "statefulsets"`},
		{"no resource given", base + "/team-a/deployments.apps/web.yaml", docObject("apps/v1", "Deployment", "team-a", "web"), "", ReasonPathMismatch, "resource"},
		{"shortened path of another long name", longPath, docObject("v1", "ConfigMap", "default", long[:299]+"b"), "configmaps", ReasonPathMismatch, "belongs at"},
		{"object without a valid apiVersion", base + "/team-a/deployments.apps/web.yaml", docObject("a/b/c", "Deployment", "team-a", "web"), "deployments", ReasonNotAnObject, "apiVersion"},
		{"no object", base + "/team-a/deployments.apps/web.yaml", nil, "deployments", ReasonNotAnObject, ""},

		{"secret at its own path", base + "/team-a/secrets/web.yaml", docObject("v1", "Secret", "team-a", "web"), "secrets", ReasonSecret, ""},
		{"configmap at a secret's path", base + "/team-a/secrets/web.yaml", docObject("v1", "ConfigMap", "team-a", "web"), "configmaps", ReasonSecret, ""},
		{"secret at a configmap's path", base + "/team-a/configmaps/web.yaml", docObject("v1", "Secret", "team-a", "web"), "configmaps", ReasonSecret, ""},
		{"resource secrets at a configmap's path", base + "/team-a/configmaps/web.yaml", docObject("v1", "ConfigMap", "team-a", "web"), "secrets", ReasonSecret, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CheckPath(base, c.path, c.obj, c.resource)
			if c.reason != "" {
				docWantRefused(t, err, c.reason)
				if !strings.Contains(err.Error(), c.message) {
					t.Errorf("error %q does not say %q", err, c.message)
				}
				if got != (layout.ObjectPath{}) {
					t.Errorf("path = %+v, want none", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckPath: %v", err)
			}
			want := layout.ObjectPath{
				Namespace: c.obj.GetNamespace(), Group: c.obj.GroupVersionKind().Group, Resource: c.resource, Name: c.obj.GetName(),
				Shortened: c.path == longPath,
			}
			if got != want {
				t.Errorf("CheckPath = %+v, want %+v", got, want)
			}
		})
	}
}

func TestPathTarget(t *testing.T) {
	const base = "clusters/prod"
	longPath := layout.Path(base, "", "configmaps", "default", strings.Repeat("a", 300))
	cases := []struct {
		name   string
		path   string
		want   layout.ObjectPath
		reason string
	}{
		{"deployment", base + "/team-a/deployments.apps/web.yaml", layout.ObjectPath{Namespace: "team-a", Group: "apps", Resource: "deployments", Name: "web"}, ""},
		{"cluster-scoped", base + "/_cluster/namespaces/team-a.yaml", layout.ObjectPath{Resource: "namespaces", Name: "team-a"}, ""},
		{"shortened name is left empty", longPath, layout.ObjectPath{Namespace: "default", Resource: "configmaps", Shortened: true}, ""},
		{"outside the base folder", "other/team-a/deployments.apps/web.yaml", layout.ObjectPath{}, ReasonOutsideFolder},
		{"not an object's file", base + "/team-a/deployments.apps/web.yml", layout.ObjectPath{}, ReasonPathMismatch},
		{"too few folders", base + "/web.yaml", layout.ObjectPath{}, ReasonPathMismatch},
		{"wildcard folder", base + "/*/configmaps/web.yaml", layout.ObjectPath{}, ReasonPathMismatch},
		{"a secret", base + "/team-a/secrets/web.yaml", layout.ObjectPath{}, ReasonSecret},
		{"a cluster-scoped secret path", base + "/_cluster/secrets/web.yaml", layout.ObjectPath{}, ReasonSecret},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PathTarget(base, c.path)
			if c.reason != "" {
				docWantRefused(t, err, c.reason)
			} else if err != nil {
				t.Fatalf("PathTarget: %v", err)
			}
			if got != c.want {
				t.Errorf("PathTarget = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestRefusalMessageIsOneShortLine(t *testing.T) {
	// A key given twice is named in the message: a key of 2,000 characters makes it too long.
	var b strings.Builder
	b.WriteString(docConfigMap + "data:\n")
	long := strings.Repeat("k", 2000)
	fmt.Fprintf(&b, "  k0: x\n  ? %s\n  : x\n  ? %s\n  : y\n", long, long)
	_, err := ParseDocument([]byte(b.String()))
	docWantRefused(t, err, ReasonUnparseable)
	msg := err.(*Refused).Message
	if strings.Contains(msg, "\n") || len(msg) > 1024 || !strings.HasSuffix(msg, "...") {
		t.Errorf("message of %d bytes, want one line of at most 1024 ending in ...: %q", len(msg), msg)
	}
	if !strings.HasPrefix(msg, `data (line 7): the key "kkk`) {
		t.Errorf("message %q does not start with the first problem", msg)
	}
}

func TestParseDocumentKeepsTimestampsAsWritten(t *testing.T) {
	values := map[string]string{ // key: the scalar as written, which must come back as this string
		"date":     "2024-01-02",
		"utc":      "2024-01-02T03:04:05.000Z",
		"spaced":   "2001-12-14 21:59:43.10 -5",
		"tagged":   "!!timestamp 2001-12-14",
		"quoted":   `"2024-01-02"`,
		"notADate": "2024-13-45",
	}
	want := map[string]any{
		"date": "2024-01-02", "utc": "2024-01-02T03:04:05.000Z", "spaced": "2001-12-14 21:59:43.10 -5",
		"tagged": "2001-12-14", "quoted": "2024-01-02", "notADate": "2024-13-45",
	}
	var b strings.Builder
	b.WriteString(docConfigMap + "data:\n")
	for k, v := range values {
		fmt.Fprintf(&b, "  %s: %s\n", k, v)
	}
	doc, err := ParseDocument([]byte(b.String()))
	if err != nil {
		t.Fatalf("ParseDocument: %v", err)
	}
	if diff := cmp.Diff(want, doc.Object.Object["data"]); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}
