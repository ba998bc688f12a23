package watch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/sanitize"
	"github.com/configbutler/gitops-reverser/testenv"
)

// wantContent is the canonical YAML of the live ConfigMap, as the mirror must write it.
func (e *env) wantContent(name string) string {
	e.t.Helper()
	u, err := e.dyn.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := sanitize.YAML(sanitize.Object(u.Object))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func (e *env) remoteContent(path string) string {
	b, err := gitSrv.ReadFile(e.repo, "main", baseFolder+"/"+path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func (e *env) log() []testenv.Commit {
	e.t.Helper()
	log, err := gitSrv.Log(e.repo, "main")
	if err != nil {
		e.t.Fatal(err)
	}
	return log
}

func TestSeedWritesLiveObjectsAndDeletesOrphansInScope(t *testing.T) {
	e := newEnv(t)
	orphan := baseFolder + "/" + e.cmPath("ghost")
	if _, err := gitSrv.PushCommit(e.repo, "main", testenv.Signature{Name: "dora", Email: "dora@example.com"}, "hand-made files",
		map[string]string{orphan: "kind: ConfigMap\n", baseFolder + "/README.md": "ours\n", "outside/x.yaml": "x: 1\n"}, nil); err != nil {
		t.Fatal(err)
	}
	e.configMap("alpha", map[string]string{"k": "v"})
	e.configMap("beta", map[string]string{"multi": "line one\nline two\n"})
	e.watchRule("cms", "configmaps")
	e.startManager()

	e.waitFiles("README.md", e.cmPath("alpha"), e.cmPath("beta"))
	for _, name := range []string{"alpha", "beta"} {
		if got, want := e.remoteContent(e.cmPath(name)), e.wantContent(name); got != want {
			t.Errorf("%s in Git:\n%s\nwant:\n%s", name, got, want)
		}
	}
	all, _ := gitSrv.Files(e.repo, "main")
	if !slices.Contains(all, "outside/x.yaml") {
		t.Errorf("a file outside the base folder was touched: %v", all)
	}
	head := e.log()[0]
	if head.CommitterName != "gitops-reverser" || head.Trailers["X-ConfigButler-ClusterUID"] != "test-cluster" {
		t.Errorf("head commit committer %q trailers %v", head.CommitterName, head.Trailers)
	}
	for _, c := range e.log() {
		if len(c.Parents) > 1 {
			t.Errorf("merge commit %s in history", c.SHA)
		}
	}
}

func TestTrailFollowsCreateUpdateDeleteAndIgnoresStatusOnlyUpdates(t *testing.T) {
	e := newEnv(t)
	e.watchRule("cms", "configmaps", "deployments")
	e.startManager()
	e.waitFiles() // seeded: nothing yet
	e.configMap("one", map[string]string{"a": "1"})
	e.waitFiles(e.cmPath("one"))

	cms := e.kube.CoreV1().ConfigMaps(e.ns)
	if _, err := cms.Patch(e.ctx, "one", types.MergePatchType, []byte(`{"data":{"a":"2"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(e.t, time.Minute, "update reaches the remote", func() (bool, string) {
		got := e.remoteContent(e.cmPath("one"))
		return strings.Contains(got, `a: "2"`), got
	})

	// A Deployment whose status changes: the status-only update must not make a commit.
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	created, err := e.kube.AppsV1().Deployments(e.ns).Create(e.ctx, deploy, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deployPath := e.ns + "/deployments.apps/web.yaml"
	e.waitFiles(e.cmPath("one"), deployPath)
	commitsBefore := len(e.log())
	created.Status.ObservedGeneration = created.Generation
	created.Status.Replicas = 3
	if _, err := e.kube.AppsV1().Deployments(e.ns).UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The delete is the marker: once it is in Git, the status update before it was processed too.
	if err := cms.Delete(e.ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFiles(deployPath)
	log := e.log()
	if added := len(log) - commitsBefore; added != 1 {
		t.Errorf("%d commits after the status update and the delete, want 1 (the delete): %v", added, subjects(log[:added]))
	}
}

func subjects(log []testenv.Commit) []string {
	var out []string
	for _, c := range log {
		out = append(out, fmt.Sprintf("%s by %s", c.Subject, c.AuthorName))
	}
	return out
}
