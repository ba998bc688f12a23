package restore

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/sops"
)

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name}}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

func TestSelectorsChooseByKindAndNamespace(t *testing.T) {
	parse := func(ss ...string) []Selector {
		var out []Selector
		for _, s := range ss {
			sel, err := ParseSelector(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sel)
		}
		return out
	}
	deploy := object("apps/v1", "Deployment", "team-a", "web")
	cm := object("v1", "ConfigMap", "team-b", "settings")
	role := object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "viewer")
	cases := []struct {
		only, exclude []string
		want          []string // names selected of deploy, cm, role
	}{
		{want: []string{"web", "settings", "viewer"}},
		{only: []string{"kind=deployment"}, want: []string{"web"}},
		{only: []string{"kind=Deployment.apps"}, want: []string{"web"}},
		{only: []string{"kind=Deployment.batch"}, want: nil},
		{only: []string{"namespace=team-b"}, want: []string{"settings"}},
		{only: []string{"namespace="}, want: []string{"viewer"}},
		{only: []string{"kind=ConfigMap", "kind=Deployment", "namespace=team-a"}, want: []string{"web"}},
		{exclude: []string{"kind=ConfigMap"}, want: []string{"web", "viewer"}},
		{only: []string{"namespace=team-a", "namespace=team-b"}, exclude: []string{"kind=Deployment"}, want: []string{"settings"}},
	}
	for _, tc := range cases {
		var got []string
		for _, o := range []*unstructured.Unstructured{deploy, cm, role} {
			if selected(o, parse(tc.only...), parse(tc.exclude...)) {
				got = append(got, o.GetName())
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("--only %v --exclude %v selects %v, want %v", tc.only, tc.exclude, got, tc.want)
		}
	}
	for _, bad := range []string{"Deployment", "kind=", "name=web", "label=a"} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("ParseSelector(%q) accepted it", bad)
		}
	}
}

func TestWhatIsLeftOutByDefault(t *testing.T) {
	withAnnotation := func(u *unstructured.Unstructured, k, v string) *unstructured.Unstructured {
		u.SetAnnotations(map[string]string{k: v})
		return u
	}
	withLabel := func(u *unstructured.Unstructured, k, v string) *unstructured.Unstructured {
		u.SetLabels(map[string]string{k: v})
		return u
	}
	token := object("v1", "Secret", "a", "t")
	token.Object["type"] = "kubernetes.io/service-account-token"
	cases := []struct {
		obj  *unstructured.Unstructured
		want string
	}{
		{object("configbutler.ai/v1alpha1", "GitDestination", "a", "d"), reasonConfiguration},
		{object("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "gitops-reverser"), reasonConfiguration},
		{withLabel(object("v1", "Secret", "gitops-reverser-system", "digest"), "app.kubernetes.io/managed-by", "gitops-reverser"), reasonConfiguration},
		{withAnnotation(object("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "", "exempt"), "apf.kubernetes.io/autoupdate-spec", "true"), reasonAPIServer},
		{object("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "", "mine"), ""},
		{object("networking.k8s.io/v1", "IPAddress", "", "10.0.0.1"), reasonAPIServer},
		{object("v1", "ConfigMap", "a", "kube-root-ca.crt"), reasonAPIServer},
		{object("v1", "Service", "default", "kubernetes"), reasonAPIServer},
		{object("v1", "Service", "a", "kubernetes"), ""},
		{withLabel(object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin"), "kubernetes.io/bootstrapping", "rbac-defaults"), reasonAPIServer},
		{object("scheduling.k8s.io/v1", "PriorityClass", "", "system-node-critical"), reasonAPIServer},
		{token, ""}, // restored without its token, which the new cluster issues (withoutToken)
		{object("apps/v1", "Deployment", "a", "web"), ""},
		{object("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "kyverno"), ""},
	}
	for _, tc := range cases {
		if got := leftOutByDefault(tc.obj, false); got != tc.want {
			t.Errorf("%s %s: left out %q, want %q", tc.obj.GetKind(), tc.obj.GetName(), got, tc.want)
		}
	}
	if got := leftOutByDefault(object("configbutler.ai/v1alpha1", "WatchRule", "a", "w"), true); got != "" {
		t.Errorf("--include-configuration still leaves a WatchRule out: %q", got)
	}
}

// The waves: CRDs, namespaces, cluster-scoped, what workloads use, workloads, the rest, and
// admission last, whatever the files are called.
func TestWavesOrderWhatDependsOnWhat(t *testing.T) {
	type in struct {
		obj        *unstructured.Unstructured
		namespaced bool
	}
	objs := []in{
		{object("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "policy"), false},
		{object("example.com/v1", "Widget", "a", "gear"), true},
		{object("apps/v1", "Deployment", "a", "web"), true},
		{object("v1", "ServiceAccount", "a", "runner"), true},
		{object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "viewer"), false},
		{object("v1", "Namespace", "", "a"), false},
		{object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com"), false},
	}
	var items []*item
	for _, o := range objs {
		items = append(items, &item{Result: Result{Kind: o.obj.GetKind(), Name: o.obj.GetName()}, wave: waveOf(o.obj, o.namespaced)})
	}
	var got []string
	for _, wave := range waves(items) {
		var names []string
		for _, it := range wave {
			names = append(names, it.Kind)
		}
		got = append(got, strings.Join(names, ","))
	}
	want := []string{"CustomResourceDefinition", "Namespace", "ClusterRole", "ServiceAccount", "Deployment", "Widget", "ValidatingWebhookConfiguration"}
	if !slices.Equal(got, want) {
		t.Errorf("waves %v, want %v", got, want)
	}
}

func TestParseDecryptsSecretsOrSaysWhyNot(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: a\n  annotations:\n    " +
		sops.DigestAnnotation + ": abc\ndata:\n  password: aHVudGVyMg==\n")
	doc, err := sops.Encrypt(plain, []string{id.Recipient().String()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	daemonsPlain := []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: gitops-reverser-sops-digest\n  namespace: gitops-reverser-system\n" +
		"  labels:\n    app.kubernetes.io/managed-by: gitops-reverser\ndata:\n  key: aHVudGVyMg==\n")
	daemons, err := sops.Encrypt(daemonsPlain, []string{id.Recipient().String()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	files := []file{
		{path: "a/secrets/db.yaml", data: doc},
		{path: ".sops.yaml", data: []byte("creation_rules:\n- age: age1xyz\n")},
		{path: "a/configmaps/bad.yaml", data: []byte("kind: ConfigMap\n  bad: [indent\n")},
		{path: "gitops-reverser-system/secrets/gitops-reverser-sops-digest.yaml", data: daemons},
	}
	items := parse(files, nil)
	(&applier{}).choose(items)
	if len(items) != 3 || items[0].Outcome != Skipped || !strings.Contains(items[0].Reason, "SOPS_AGE_KEY_FILE") || items[0].Name != "db" {
		t.Fatalf("without a key: %+v", items)
	}
	if items[1].Outcome != Failed || items[1].Path != "a/configmaps/bad.yaml" {
		t.Errorf("a file that does not parse: %+v", items[1])
	}
	if items[2].Outcome != LeftOut || items[2].Reason != reasonConfiguration {
		t.Errorf("without a key, the daemon's own Secret is not left out as its configuration: %+v", items[2].Result)
	}
	items = parse(files[:1], []string{id.String()})
	if len(items) != 1 || items[0].Outcome != "" {
		t.Fatalf("with the key: %+v", items)
	}
	obj := items[0].obj
	if v, _, _ := unstructured.NestedString(obj.Object, "data", "password"); v != "aHVudGVyMg==" {
		t.Errorf("decrypted password %q", v)
	}
	if obj.GetAnnotations() != nil {
		t.Errorf("the mirror's digest annotation is restored: %v", obj.GetAnnotations())
	}
	other, _ := age.GenerateX25519Identity()
	if items := parse(files[:1], []string{other.String()}); items[0].Outcome != Failed || !strings.Contains(items[0].Reason, "decrypt") {
		t.Errorf("with a wrong key: %+v", items[0].Result)
	}
}

// A folder of a Git repository is read as it stood at a commit or a time: the newest commit not
// after the time.
func TestSourceReadsTheFolderAtACommitOrTime(t *testing.T) {
	repo := t.TempDir()
	gitIn := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), append([]string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(level string) {
		dir := filepath.Join(repo, "live", "a", "configmaps")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		doc := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s, namespace: a}\ndata: {level: " + level + "}\n"
		if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(nil, "init", "-q", "-b", "main")
	write("debug")
	gitIn(nil, "add", "-A")
	at := func(when string) []string { return []string{"GIT_AUTHOR_DATE=" + when, "GIT_COMMITTER_DATE=" + when} }
	gitIn(at("2026-11-24T10:00:00Z"), "commit", "-qm", "debug")
	first := gitIn(nil, "rev-parse", "HEAD")
	write("trace")
	gitIn(nil, "add", "-A")
	gitIn(at("2026-11-25T10:00:00Z"), "commit", "-qm", "trace")

	level := func(s Source) string {
		t.Helper()
		files, _, err := s.read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		items := parse(files, nil)
		if len(items) != 1 {
			t.Fatalf("%+v: %d items", s, len(items))
		}
		v, _, _ := unstructured.NestedString(items[0].obj.Object, "data", "level")
		return v
	}
	for _, tc := range []struct {
		source Source
		want   string
	}{
		{Source{Dir: filepath.Join(repo, "live")}, "trace"},
		{Source{Dir: filepath.Join(repo, "live"), At: first[:10]}, "debug"},
		{Source{Dir: filepath.Join(repo, "live"), At: "2026-11-24T23:00:00Z"}, "debug"},
		{Source{Repo: repo, Branch: "main", Path: "live", At: "2026-11-25T11:00:00Z"}, "trace"},
		{Source{Repo: repo, Path: "live", At: first}, "debug"},
	} {
		if got := level(tc.source); got != tc.want {
			t.Errorf("%+v: level %q, want %q", tc.source, got, tc.want)
		}
	}
	if _, _, err := (Source{Repo: repo, Path: "live", At: "2026-11-01"}).read(context.Background()); err == nil || !strings.Contains(err.Error(), "no commit at or before") {
		t.Errorf("a time before the history: %v", err)
	}
	if _, _, err := (Source{Repo: repo, At: "last tuesday"}).read(context.Background()); err == nil || !strings.Contains(err.Error(), "neither a commit") {
		t.Errorf("an --at that is neither: %v", err)
	}
}

// On a terminal: each object created, changed or failed on a line of its own above the bar, which
// is drawn again in place and ends with the last object.
func TestBarDrawsOverItselfAndSaysWhatHappened(t *testing.T) {
	var buf strings.Builder
	bar := NewBar(&buf, true)
	bar.Progress(1, 3, Result{Kind: "Deployment", Namespace: "a", Name: "web", Outcome: Created})
	bar.Progress(2, 3, Result{Kind: "ConfigMap", Namespace: "a", Name: "s", Outcome: Unchanged})
	bar.Progress(3, 3, Result{Kind: "Secret", Namespace: "b", Name: "db", Outcome: Failed, Reason: "apply: error from server (Forbidden): no"})
	got := buf.String()
	for _, want := range []string{
		"\r\033[Kdeployment/web in a would be created\n",
		"\r\033[Krestoring [==========                    ] 1/3",
		"\r\033[Ksecret/db in b failed: apply: error from server (Forbidden): no\n",
		"\r\033[Krestoring [==============================] 3/3\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the bar's output lacks %q:\n%q", want, got)
		}
	}
	if strings.Contains(got, "configmap/s") {
		t.Errorf("an unchanged object has a line: %q", got)
	}
}
