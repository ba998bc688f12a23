package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/testenv"
)

// converge bounds every wait of these tests.
const converge = 20 * time.Second

var (
	installOnce sync.Once
	installErr  error
	nsSeq       atomic.Int64
)

// env is one test's world: namespaces of its own, a running notifier, and a recorder whose Events
// it taps, as the daemon's parts' recorders are tapped.
type env struct {
	t    testing.TB
	dyn  dynamic.Interface
	kube kubernetes.Interface
	n    *Notifier
	rec  *controller.Events
	reg  *metrics.Registry
	// writer and writerKube, when set (as), make the creates of a tenant.
	writer     dynamic.Interface
	writerKube kubernetes.Interface
	admitted   sync.Map // "namespace/destination/from" → true: what Consent admits
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	installOnce.Do(func() {
		installErr = crds.Install(context.Background(), cp.AdminConfig(), slog.New(slog.DiscardHandler))
	})
	if installErr != nil {
		t.Fatalf("install CRDs: %v", installErr)
	}
	e := &env{t: t, dyn: dynamic.NewForConfigOrDie(cp.AdminConfig()), kube: kubernetes.NewForConfigOrDie(cp.AdminConfig()), reg: metrics.New()}
	cfg.Dynamic, cfg.Metrics, cfg.Home = e.dyn, e.reg.Notify, "gitops-reverser-system"
	cfg.Consent = func(namespace, name, from string) bool {
		_, ok := e.admitted.Load(namespace + "/" + name + "/" + from)
		return ok
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.n = n
	e.rec = controller.NewEvents(e.dyn, nil)
	e.rec.Tap(n.Offer)
	testenv.Run(t, n)
	testenv.Run(t, e.rec)
	return e
}

// as runs do with the env's creates made through cfg (a user's), its reads still the admin's:
// the objects a test makes as a tenant are made with that tenant's rights alone.
func (e *env) as(cfg *rest.Config, do func()) {
	e.writer, e.writerKube = dynamic.NewForConfigOrDie(cfg), kubernetes.NewForConfigOrDie(cfg)
	defer func() { e.writer, e.writerKube = nil, nil }()
	do()
}

// writers are the clients creates go through: the admin's, or those as set.
func (e *env) writers() (dynamic.Interface, kubernetes.Interface) {
	if e.writer != nil {
		return e.writer, e.writerKube
	}
	return e.dyn, e.kube
}

// namespace creates a namespace of the test's and returns its name.
func (e *env) namespace(prefix string) string {
	e.t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, nsSeq.Add(1))
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return ns
}

func (e *env) create(gvr schema.GroupVersionResource, namespace string, obj any) {
	e.t.Helper()
	u, err := crds.ToUnstructured(obj)
	if err != nil {
		e.t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	dyn, _ := e.writers()
	if _, err := dyn.Resource(gvr).Namespace(namespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create %s %s/%s: %v", gvr.Resource, namespace, u.GetName(), err)
	}
}

func (e *env) secret(namespace, name string, data map[string]string) {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, StringData: data}
	_, kube := e.writers()
	if _, err := kube.CoreV1().Secrets(namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// channel creates a NotifyChannel of typ whose Secret holds address (and hmacKey when set).
func (e *env) channel(namespace, name, typ, address string, tune func(*crds.NotifyChannelSpec)) {
	e.t.Helper()
	data := map[string]string{crds.ChannelAddressKey: address, crds.ChannelHMACKey: hmacKey}
	e.secret(namespace, name+"-address", data)
	spec := crds.NotifyChannelSpec{Type: typ, SecretRef: crds.LocalReference{Name: name + "-address"}}
	if tune != nil {
		tune(&spec)
	}
	e.create(crds.NotifyChannels, namespace, &crds.NotifyChannel{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	e.ready(crds.NotifyChannels, namespace, name)
}

// rule creates a NotifyRule sending to channel, after tune.
func (e *env) rule(namespace, name, channel string, tune func(*crds.NotifyRuleSpec)) {
	e.t.Helper()
	spec := crds.NotifyRuleSpec{ChannelRef: crds.LocalReference{Name: channel}}
	if tune != nil {
		tune(&spec)
	}
	e.create(crds.NotifyRules, namespace, &crds.NotifyRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	e.ready(crds.NotifyRules, namespace, name)
}

// ready waits for the object's Ready condition to be True.
func (e *env) ready(gvr schema.GroupVersionResource, namespace, name string) {
	e.t.Helper()
	testenv.Eventually(e.t, converge, gvr.Resource+" "+name+" Ready", func() (bool, string) {
		status, reason := e.condition(gvr, namespace, name)
		return status == "True", status + " " + reason
	})
}

// condition is the object's Ready status and reason.
func (e *env) condition(gvr schema.GroupVersionResource, namespace, name string) (status, reason string) {
	u, err := e.dyn.Resource(gvr).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == crds.ConditionReady {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]) + ": " + fmt.Sprint(m["message"])
		}
	}
	return "", "no Ready condition"
}

// proposal creates a Proposal of destination dest in namespace whose diff changes a ConfigMap's
// password and colour, as write-back opens one, and returns it.
func (e *env) proposal(namespace, name, dest, commit string) *crds.Proposal {
	e.t.Helper()
	p := &crds.Proposal{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: crds.ProposalSpec{
			DestinationRef: crds.LocalReference{Name: dest}, Change: crds.ChangeUpdate,
			Target: crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: namespace, Name: "settings"},
			Path:   "apps/settings.yaml", SourceCommit: commit, Author: crds.GitAuthor{Name: "Alice", Email: "alice@example.com"},
			Desired: "kind: ConfigMap\n", Diff: "--- live\n+++ git\n data:\n-  colour: blue\n+  colour: green\n-  password: hunter2\n+  password: s3cret\n",
			LiveDigest: "0000000000000000000000000000000000000000000000000000000000000000",
		},
	}
	p.Namespace = namespace
	e.create(crds.Proposals, namespace, p)
	return p
}

// opened records the Event write-back records when it opens p.
func (e *env) opened(p *crds.Proposal) {
	e.rec.Eventf(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeNormal, "Opened",
		"update ConfigMap %s/settings from commit %s by Alice", p.Namespace, p.Spec.SourceCommit[:7])
}

// hmacKey signs the webhooks of the tests' channels.
const hmacKey = "test-hmac-key"

// sink is a loopback webhook receiver that checks each request's X-Signature with hmacKey and
// keeps the notices it got; answer says what it answers (200 when nil).
type sink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []Notice
	at     []time.Time // when each of got arrived
	bad    []string
	answer func(w http.ResponseWriter, r *http.Request) bool // true: answered, nothing kept
}

func newSink(t testing.TB, answer func(w http.ResponseWriter, r *http.Request) bool) *sink {
	s := &sink{answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	if s.answer != nil && s.answer(w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, []byte(hmacKey))
	mac.Write(body)
	var n Notice
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !hmac.Equal([]byte(r.Header.Get("X-Signature")), []byte("sha256="+hex.EncodeToString(mac.Sum(nil)))):
		s.bad = append(s.bad, "bad signature: "+r.Header.Get("X-Signature"))
	case json.Unmarshal(body, &n) != nil:
		s.bad = append(s.bad, "not a notice: "+string(body))
	default:
		s.got = append(s.got, n)
		s.at = append(s.at, time.Now())
	}
}

func (s *sink) notices() []Notice {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		panic(fmt.Sprint(s.bad))
	}
	return append([]Notice(nil), s.got...)
}

// receives waits until the sink holds n notices.
func (s *sink) receives(t testing.TB, n int) []Notice {
	t.Helper()
	testenv.Eventually(t, converge, fmt.Sprintf("%d notices", n), func() (bool, string) {
		got := s.notices()
		return len(got) >= n, fmt.Sprintf("%d notices", len(got))
	})
	return s.notices()
}

// arrived is when the i-th notice arrived.
func (s *sink) arrived(i int) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[i]
}
