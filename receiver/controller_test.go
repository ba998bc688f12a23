package receiver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's control plane, shared by the controller tests: one real etcd and
// kube-apiserver (no controller-manager, so no garbage collector and no namespace deletion).
var cp *testenv.ControlPlane

// TestMain runs the tests against one control plane, then checks that every controller, informer
// and timer a test started was joined.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp, testenv.LeakIgnores()...))
}

// converge bounds every wait of these tests.
const converge = 20 * time.Second

var (
	installOnce sync.Once
	installErr  error
	nsSeq       atomic.Int64
)

// ctlEnv is one test's world: its own namespace and a running controller whose generated
// receivers are limited to that namespace.
type ctlEnv struct {
	t    *testing.T
	ns   string
	dyn  dynamic.Interface
	kube kubernetes.Interface
	idx  *Index
	ctl  *Controller
}

func newCtlEnv(t *testing.T) *ctlEnv {
	t.Helper()
	ctx := context.Background()
	installOnce.Do(func() {
		installErr = crds.Install(ctx, cp.AdminConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
	if installErr != nil {
		t.Fatalf("install CRDs: %v", installErr)
	}
	e := &ctlEnv{
		t: t, ns: fmt.Sprintf("rcv-%d", nsSeq.Add(1)), idx: &Index{},
		dyn: dynamic.NewForConfigOrDie(cp.AdminConfig()), kube: kubernetes.NewForConfigOrDie(cp.AdminConfig()),
	}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	ctl, err := NewController(ControllerConfig{
		Kube: cp.AdminConfig(), Index: e.idx, Namespace: e.ns, Resync: 200 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.ctl = ctl
	testenv.Run(t, ctl)
	return e
}

// create creates obj (a crds kind) in the test's namespace.
func (e *ctlEnv) create(gvr schema.GroupVersionResource, obj any) {
	e.t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		e.t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	u.SetNamespace(e.ns)
	if _, err := e.dyn.Resource(gvr).Namespace(e.ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

// patch merges body into the named object (into its status when sub is "status").
func (e *ctlEnv) patch(gvr schema.GroupVersionResource, name, body string, sub ...string) {
	e.t.Helper()
	if _, err := e.dyn.Resource(gvr).Namespace(e.ns).Patch(context.Background(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, sub...); err != nil {
		e.t.Fatalf("patch %s %s: %v", gvr.Resource, name, err)
	}
}

func (e *ctlEnv) secret(name, token string) {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"token": []byte(token)}}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ctlEnv) repo(name, url string, gen *crds.GeneratedReceiver) {
	e.t.Helper()
	e.create(crds.GitRepoConfigs, &crds.GitRepoConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       crds.GitRepoConfigSpec{RepoURL: url, AllowedBranches: []string{"main"}, Receiver: gen},
	})
}

func (e *ctlEnv) destination(name, repo string) {
	e.t.Helper()
	e.create(crds.GitDestinations, &crds.GitDestination{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: repo}, Branch: "main", BaseFolder: "clusters/" + name},
	})
}

func (e *ctlEnv) receiver(name, secret string, resources ...crds.ReceiverResource) {
	e.t.Helper()
	e.create(crds.Receivers, &crds.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       crds.ReceiverSpec{Type: crds.ReceiverGitHub, SecretRef: crds.LocalReference{Name: secret}, Resources: resources},
	})
}

// getReceiver reads a Receiver; nil when it does not exist.
func (e *ctlEnv) getReceiver(name string) *crds.Receiver {
	e.t.Helper()
	u, err := e.dyn.Resource(crds.Receivers).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := crds.FromUnstructured[crds.Receiver](u)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *ctlEnv) getRepo(name string) *crds.GitRepoConfig {
	e.t.Helper()
	u, err := e.dyn.Resource(crds.GitRepoConfigs).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	g, err := crds.FromUnstructured[crds.GitRepoConfig](u)
	if err != nil {
		e.t.Fatal(err)
	}
	return g
}

// waitReady waits until the Receiver's Ready condition has status and reason.
func (e *ctlEnv) waitReady(name string, status metav1.ConditionStatus, reason string) *crds.Receiver {
	e.t.Helper()
	var r *crds.Receiver
	testenv.Eventually(e.t, converge, fmt.Sprintf("Receiver %s Ready %s %s", name, status, reason), func() (bool, string) {
		r = e.getReceiver(name)
		if r == nil {
			return false, "missing"
		}
		for _, c := range r.Status.Conditions {
			if c.Type == crds.ConditionReady {
				return c.Status == status && c.Reason == reason && r.Status.ObservedGeneration == r.Generation,
					fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message)
			}
		}
		return false, "no Ready condition"
	})
	return r
}

// waitEntry waits until the index has an entry at path that ok accepts.
func (e *ctlEnv) waitEntry(path string, ok func(*Entry) bool) *Entry {
	e.t.Helper()
	var got *Entry
	testenv.Eventually(e.t, converge, "index entry at "+path, func() (bool, string) {
		got = e.idx.Lookup(path)
		if got == nil {
			return false, "none"
		}
		return ok(got), fmt.Sprintf("%+v", *got)
	})
	return got
}

func TestControllerIndexesAReceiver(t *testing.T) {
	e := newCtlEnv(t)
	const url = "https://git.example.com/org/app.git"
	e.secret("hook", "tok-1")
	e.repo("app", url, nil)
	e.destination("prod", "app")
	e.receiver("push", "hook", crds.ReceiverResource{Kind: crds.KindGitDestination, Name: "prod"})

	path := WebhookPath([]byte("tok-1"), "push", e.ns)
	entry := e.waitEntry(path, func(x *Entry) bool { return len(x.Targets) == 1 })
	want := Target{Namespace: e.ns, Name: "prod", RepoURL: url}
	if entry.Targets[0] != want || entry.NotReady != "" || entry.Type != crds.ReceiverGitHub ||
		string(entry.Token) != "tok-1" || entry.Key() != e.ns+"/push" {
		t.Errorf("entry = %+v, want a ready github entry with target %+v", *entry, want)
	}
	r := e.waitReady("push", metav1.ConditionTrue, ReasonReady)
	if r.Status.WebhookPath != path {
		t.Errorf("status.webhookPath = %q, want %q", r.Status.WebhookPath, path)
	}
	if got := e.ctl.ReceiversFor("git@git.example.com:org/app"); !slices.Contains(got, e.ns+"/push") {
		t.Errorf("ReceiversFor(scp form) = %v, want %s/push", got, e.ns)
	}
}

func TestControllerExpandsSuspendsAndRotates(t *testing.T) {
	e := newCtlEnv(t)
	const url = "https://git.example.com/org/shared.git"
	e.secret("hook", "old-token")
	e.repo("shared", url, nil)
	e.destination("a", "shared")
	e.destination("b", "shared")
	e.receiver("all", "hook", crds.ReceiverResource{Kind: crds.KindGitRepoConfig, Name: "shared"})

	oldPath := WebhookPath([]byte("old-token"), "all", e.ns)
	e.waitEntry(oldPath, func(x *Entry) bool {
		return slices.Equal(x.Targets, []Target{{e.ns, "a", url}, {e.ns, "b", url}})
	})

	t.Run("rotated token", func(t *testing.T) {
		s, err := e.kube.CoreV1().Secrets(e.ns).Get(context.Background(), "hook", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data["token"] = []byte("new-token")
		if _, err := e.kube.CoreV1().Secrets(e.ns).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		newPath := WebhookPath([]byte("new-token"), "all", e.ns)
		testenv.Eventually(t, converge, "the new path indexed, the old one gone", func() (bool, string) {
			return e.idx.Lookup(newPath) != nil && e.idx.Lookup(oldPath) == nil, ""
		})
		// The Receiver was Ready before the rotation too: wait for the status to name the new path.
		testenv.Eventually(t, converge, "status.webhookPath the new path, Ready", func() (bool, string) {
			r := e.getReceiver("all")
			if r == nil {
				return false, "missing"
			}
			ready := meta.FindStatusCondition(r.Status.Conditions, crds.ConditionReady)
			return r.Status.WebhookPath == newPath && ready != nil && ready.Status == metav1.ConditionTrue,
				fmt.Sprintf("webhookPath %q, Ready %+v", r.Status.WebhookPath, ready)
		})
	})

	t.Run("suspended", func(t *testing.T) {
		e.patch(crds.Receivers, "all", `{"spec":{"suspend":true}}`)
		e.waitReady("all", metav1.ConditionFalse, ReasonSuspended)
		e.waitEntry(WebhookPath([]byte("new-token"), "all", e.ns), func(x *Entry) bool { return x.NotReady == "suspended" })
		e.waitEvent(e.ns, "all", corev1.EventTypeWarning, ReasonSuspended)
	})

	t.Run("missing secret", func(t *testing.T) {
		e.receiver("lost", "nope", crds.ReceiverResource{Kind: crds.KindGitDestination, Name: "a"})
		r := e.waitReady("lost", metav1.ConditionFalse, ReasonSecretNotFound)
		if r.Status.WebhookPath != "" {
			t.Errorf("status.webhookPath = %q without a token", r.Status.WebhookPath)
		}
	})

	t.Run("no destination", func(t *testing.T) {
		e.receiver("void", "hook", crds.ReceiverResource{Kind: crds.KindGitDestination, Name: "absent"})
		e.waitReady("void", metav1.ConditionFalse, ReasonNoDestination)
	})
}

func TestControllerObserveCoalesces(t *testing.T) {
	e := newCtlEnv(t)
	e.secret("hook", "tok")
	e.repo("app", "https://git.example.com/org/obs.git", nil)
	e.destination("prod", "app")
	e.receiver("obs", "hook", crds.ReceiverResource{Kind: crds.KindGitDestination, Name: "prod"})
	r := e.waitReady("obs", metav1.ConditionTrue, ReasonReady)

	ctx, cancel := context.WithTimeout(context.Background(), converge)
	defer cancel()
	w, err := e.dyn.Resource(crds.Receivers).Namespace(e.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=obs", ResourceVersion: r.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	const n = 200
	burst := func(prefix string) string {
		for i := range n {
			e.ctl.Observe(e.ns+"/obs", crds.OutcomeTriggered, fmt.Sprintf("%s %d", prefix, i))
		}
		return fmt.Sprintf("%s %d", prefix, n-1)
	}
	first := time.Now()
	written := waitLastEvent(t, w.ResultChan(), burst("push"))
	if len(written) > 2 {
		t.Errorf("%d Observe calls in a burst wrote %d statuses %v, want at most 2 (debounced)", n, len(written), written)
	}
	// Right after a write, the next one waits for the rest of ObserveInterval: the first write
	// started after first, so the second cannot be seen before first + ObserveInterval.
	written = waitLastEvent(t, w.ResultChan(), burst("tag"))
	if len(written) != 1 {
		t.Errorf("a burst within ObserveInterval of the last write wrote %v, want only its last event", written)
	}
	if since := time.Since(first); since < ObserveInterval {
		t.Errorf("two writes of the last event within %v, want at most one per %v", since, ObserveInterval)
	}
}

// waitLastEvent reads Receiver watch events until status.lastEvent is last, and returns the
// distinct lastEvent values written meanwhile.
func waitLastEvent(t *testing.T, events <-chan watch.Event, last string) []string {
	t.Helper()
	var written []string
	for ev := range events {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		msg, _, _ := unstructured.NestedString(u.Object, "status", "lastEvent")
		if msg != "" && (len(written) == 0 || written[len(written)-1] != msg) {
			written = append(written, msg)
		}
		if msg == last {
			outcome, _, _ := unstructured.NestedString(u.Object, "status", "lastOutcome")
			ts, _, _ := unstructured.NestedString(u.Object, "status", "lastEventTime")
			if outcome != crds.OutcomeTriggered || ts == "" {
				t.Errorf("lastOutcome %q, lastEventTime %q: want Triggered and a time", outcome, ts)
			}
			return written
		}
	}
	t.Fatalf("lastEvent %q never written within %v (wrote %v)", last, converge, written)
	return nil
}

func TestControllerGeneratesAReceiver(t *testing.T) {
	e := newCtlEnv(t)
	const url = "https://git.example.com/org/gen.git"
	e.repo("gen", url, &crds.GeneratedReceiver{Type: crds.ReceiverGitHub})
	e.destination("prod", "gen")
	// Another component's condition: status.receiver writes must leave it alone.
	e.patch(crds.GitRepoConfigs, "gen", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Connected","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, "status")
	grc := e.getRepo("gen")
	const name = "gen-receiver"

	var st *crds.GeneratedReceiverStatus
	testenv.Eventually(t, converge, "GitRepoConfig status.receiver", func() (bool, string) {
		st = e.getRepo("gen").Status.Receiver
		return st != nil && st.WebhookPath != "", fmt.Sprintf("%+v", st)
	})
	s, err := e.kube.CoreV1().Secrets(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := s.Data["token"]
	if len(token) != 64 {
		t.Errorf("token %q: want 32 random bytes, hex-encoded", token)
	}
	path := WebhookPath(token, name, e.ns)
	if *st != (crds.GeneratedReceiverStatus{Name: name, SecretName: name, WebhookPath: path}) {
		t.Errorf("status.receiver = %+v", *st)
	}
	checkOwned(t, "Secret", s.OwnerReferences, grc)
	r := e.getReceiver(name)
	checkOwned(t, "Receiver", r.OwnerReferences, grc)
	if r.Spec.Type != crds.ReceiverGitHub || r.Spec.SecretRef.Name != name || r.Labels[GeneratedByLabel] != "gen" ||
		!slices.Equal(r.Spec.Resources, []crds.ReceiverResource{{Kind: crds.KindGitRepoConfig, Name: "gen"}}) {
		t.Errorf("generated Receiver = %+v %+v", r.Labels, r.Spec)
	}
	e.waitEntry(path, func(x *Entry) bool { return slices.Equal(x.Targets, []Target{{e.ns, "prod", url}}) })
	if c := e.getRepo("gen").Status.Conditions; len(c) != 1 || c[0].Reason != "Connected" {
		t.Errorf("status.conditions = %+v, want the other component's condition untouched", c)
	}

	t.Run("deleted is recreated", func(t *testing.T) {
		if err := e.dyn.Resource(crds.Receivers).Namespace(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, converge, "the Receiver recreated", func() (bool, string) {
			again := e.getReceiver(name)
			return again != nil && again.UID != r.UID, ""
		})
	})

	t.Run("edited is repaired", func(t *testing.T) {
		e.patch(crds.Receivers, name, `{"spec":{"type":"gitlab"}}`)
		testenv.Eventually(t, converge, "spec.type repaired", func() (bool, string) {
			got := e.getReceiver(name)
			return got != nil && got.Spec.Type == crds.ReceiverGitHub, fmt.Sprintf("%+v", got)
		})
	})

	t.Run("removed spec.receiver deletes both", func(t *testing.T) {
		e.patch(crds.GitRepoConfigs, "gen", `{"spec":{"receiver":null}}`)
		testenv.Eventually(t, converge, "Receiver, Secret and status.receiver gone", func() (bool, string) {
			_, err := e.kube.CoreV1().Secrets(e.ns).Get(context.Background(), name, metav1.GetOptions{})
			g := e.getRepo("gen")
			return e.getReceiver(name) == nil && apierrors.IsNotFound(err) && g.Status.Receiver == nil, fmt.Sprint(err)
		})
		if c := e.getRepo("gen").Status.Conditions; len(c) != 1 || c[0].Reason != "Connected" {
			t.Errorf("status.conditions = %+v, want the other component's condition untouched", c)
		}
	})
}

func TestControllerGeneratesInItsNamespaceOnly(t *testing.T) {
	e := newCtlEnv(t)
	// Another namespace, with no controller of its own: e's may generate in e.ns alone.
	far := &ctlEnv{t: t, ns: e.ns + "-far", dyn: e.dyn, kube: e.kube}
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: far.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	far.repo("far", "https://git.example.com/org/far.git", &crds.GeneratedReceiver{Type: crds.ReceiverGitLab})
	e.waitEvent(far.ns, "far", corev1.EventTypeWarning, "ReceiverNotGenerated")
	if r := far.getReceiver("far-receiver"); r != nil {
		t.Errorf("a Receiver was generated outside the daemon's namespace: %+v", r.ObjectMeta)
	}
	if _, err := e.kube.CoreV1().Secrets(far.ns).Get(context.Background(), "far-receiver", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret was generated outside the daemon's namespace (err %v)", err)
	}
	if st := far.getRepo("far").Status.Receiver; st != nil {
		t.Errorf("status.receiver = %+v outside the daemon's namespace", *st)
	}
}

// waitEvent waits for an Event of type and reason about the object name in namespace.
func (e *ctlEnv) waitEvent(namespace, name, typ, reason string) {
	e.t.Helper()
	testenv.Eventually(e.t, converge, fmt.Sprintf("a %s Event %s on %s/%s", typ, reason, namespace, name), func() (bool, string) {
		list, err := e.kube.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",reason=" + reason + ",type=" + typ,
		})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) > 0, ""
	})
}

// checkOwned fails unless refs hold exactly the controlling reference to g that makes the garbage
// collector delete the object with it (testenv runs no garbage collector, so the reference itself
// is checked).
func checkOwned(t *testing.T, what string, refs []metav1.OwnerReference, g *crds.GitRepoConfig) {
	t.Helper()
	if len(refs) != 1 {
		t.Fatalf("%s ownerReferences = %+v, want one", what, refs)
	}
	o := refs[0]
	if o.APIVersion != crds.GroupVersion.String() || o.Kind != crds.KindGitRepoConfig || o.Name != g.Name || o.UID != g.UID ||
		o.Controller == nil || !*o.Controller || o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
		t.Errorf("%s ownerReference = %+v, want a controller reference to GitRepoConfig %s (%s)", what, o, g.Name, g.UID)
	}
}
