package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/testenv"
)

// cp is the package's control plane, shared by its tests.
var cp *testenv.ControlPlane

// TestMain runs the tests against one control plane, then checks that every informer, worker
// and Event sender a controller started ended with its Run.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainNoLeaks(m, &cp, testenv.LeakIgnores()...))
}

const converge = 20 * time.Second

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nsSeq      atomic.Int64
)

// world is one test's namespace and clients.
type world struct {
	t    *testing.T
	ns   string
	dyn  dynamic.Interface
	kube kubernetes.Interface
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, ns: fmt.Sprintf("ctl-%d", nsSeq.Add(1)),
		dyn: dynamic.NewForConfigOrDie(cp.AdminConfig()), kube: kubernetes.NewForConfigOrDie(cp.AdminConfig())}
	if _, err := w.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return w
}

func (w *world) configMap(name string) {
	w.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}}
	if _, err := w.kube.CoreV1().ConfigMaps(w.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("create ConfigMap %s: %v", name, err)
	}
}

// run runs c until the test ends, and checks then that Run returned without an error.
func (w *world) run(c *Controller) {
	testenv.Run(w.t, c)
}

// seen counts the keys a handler was called with.
type seen struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *seen) add(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[key]++
	return s.n[key]
}

func (s *seen) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[key]
}

// inNamespace queues the key of the test's own objects only (the apiserver is shared).
func inNamespace(ns string) Keys {
	return func(obj any) string {
		if k := ObjectKey(obj); strings.HasPrefix(k, ns+"/") {
			return k
		}
		return ""
	}
}

func TestInformerQueuesTheKeyOfEveryObject(t *testing.T) {
	w := newWorld(t)
	w.configMap("before")
	var s seen
	c := New(Config{Name: "test", Dynamic: w.dyn, Workers: 3, Handle: func(_ context.Context, key string) (time.Duration, error) {
		s.add(key)
		return 0, nil
	}})
	if _, err := c.Informer(configMaps, inNamespace(w.ns)); err != nil {
		t.Fatal(err)
	}
	c.Add("added-before-run")
	w.run(c)
	w.configMap("after")
	for _, key := range []string{w.ns + "/before", w.ns + "/after", "added-before-run"} {
		testenv.Eventually(t, converge, "key "+key+" handled", func() (bool, string) {
			return s.count(key) > 0, fmt.Sprintf("%d calls", s.count(key))
		})
	}
}

// logged records the messages of a slog.Logger.
type logged struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	return nil
}
func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }

func (l *logged) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if m == msg {
			return true
		}
	}
	return false
}

func TestFailingKeyIsRetriedUpToTheCapThenGivenUp(t *testing.T) {
	w := newWorld(t)
	var s seen
	logs := &logged{}
	c := New(Config{Name: "test", Dynamic: w.dyn, MaxRetries: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond,
		Log: slog.New(logs), Handle: func(_ context.Context, key string) (time.Duration, error) {
			if s.add(key) == 1 && key == "flaky" {
				return 0, errors.New("first attempt fails")
			}
			if key == "broken" {
				return 0, errors.New("always fails")
			}
			return 0, nil
		}})
	c.Add("flaky")
	c.Add("broken")
	w.run(c)
	testenv.Eventually(t, converge, "broken given up", func() (bool, string) {
		return logs.has("ERROR test failed; giving up"), fmt.Sprintf("%d attempts", s.count("broken"))
	})
	if n := s.count("broken"); n != 4 {
		t.Errorf("broken handled %d times, want 4 (once and 3 retries)", n)
	}
	testenv.Eventually(t, converge, "flaky retried", func() (bool, string) {
		return s.count("flaky") == 2, fmt.Sprintf("%d attempts", s.count("flaky"))
	})
	if !logs.has("WARN test failed; retrying") {
		t.Errorf("no retry logged: %q", logs.msgs)
	}
}

func TestRequeueAfterHandlesTheKeyAgain(t *testing.T) {
	w := newWorld(t)
	var s seen
	c := New(Config{Name: "test", Dynamic: w.dyn, Handle: func(_ context.Context, key string) (time.Duration, error) {
		if s.add(key) < 3 {
			return time.Millisecond, nil
		}
		return 0, nil
	}})
	c.Add("again")
	w.run(c)
	testenv.Eventually(t, converge, "key handled three times", func() (bool, string) {
		return s.count("again") == 3, fmt.Sprintf("%d calls", s.count("again"))
	})
}

func TestRecordedEventsReachTheAPIServerCounted(t *testing.T) {
	w := newWorld(t)
	ref := &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: w.ns, Name: "subject"}
	var c *Controller
	c = New(Config{Name: "test", Dynamic: w.dyn, Events: w.dyn, Handle: func(_ context.Context, key string) (time.Duration, error) {
		c.Recorder().Eventf(ref, corev1.EventTypeWarning, "Tested", "handled %s", key)
		return 0, nil
	}})
	c.Add("one")
	w.run(c)
	testenv.Eventually(t, converge, "the Event recorded", func() (bool, string) {
		list, err := w.kube.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Sprintf("%v events, %v", len(list.Items), err)
		}
		ev := list.Items[0]
		return ev.Reason == "Tested" && ev.Message == "handled one" && ev.Type == corev1.EventTypeWarning &&
			ev.Source.Component == Component && ev.InvolvedObject.Name == "subject", fmt.Sprintf("%+v", ev)
	})
	c.Add("one") // the same Event again: counted on the first
	testenv.Eventually(t, converge, "the repeat counted", func() (bool, string) {
		list, err := w.kube.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Sprintf("%v events, %v", len(list.Items), err)
		}
		return list.Items[0].Count == 2, fmt.Sprintf("count %d", list.Items[0].Count)
	})
}

func TestGroupRunsOnlyBetweenStartAndStop(t *testing.T) {
	w := newWorld(t)
	w.configMap("cached")
	var s seen
	var c *Controller
	var g *Group
	var mu sync.Mutex
	var handleErr error
	c = New(Config{Name: "test", Dynamic: w.dyn, Handle: func(ctx context.Context, key string) (time.Duration, error) {
		s.add(key)
		switch key {
		case "on":
			err := g.Start(ctx)
			mu.Lock()
			handleErr = errors.Join(handleErr, err)
			mu.Unlock()
		case "off":
			g.Stop()
		}
		return 0, nil
	}})
	g = c.Group()
	g.Informer(configMaps, inNamespace(w.ns), nil)
	if err := g.Start(context.Background()); err == nil {
		t.Error("a group started before Run")
	}
	w.run(c)
	if _, ok := g.Indexer(configMaps); ok || g.Running() {
		t.Fatal("the group runs before Start")
	}
	c.Add("on")
	testenv.Eventually(t, converge, "the group's cache filled and its handler called", func() (bool, string) {
		idx, ok := g.Indexer(configMaps)
		if !ok {
			return false, "not running"
		}
		_, has, _ := idx.GetByKey(w.ns + "/cached")
		return has && s.count(w.ns+"/cached") == 1, fmt.Sprintf("cached %v, handled %d", has, s.count(w.ns+"/cached"))
	})
	c.Add("off")
	testenv.Eventually(t, converge, "the group stopped", func() (bool, string) { return !g.Running(), "running" })
	c.Add("on") // starts anew: a fresh informer lists again
	testenv.Eventually(t, converge, "the group restarted", func() (bool, string) {
		return s.count(w.ns+"/cached") == 2, fmt.Sprintf("handled %d", s.count(w.ns+"/cached"))
	})
	mu.Lock()
	defer mu.Unlock()
	if handleErr != nil {
		t.Errorf("Start: %v", handleErr)
	}
}

func TestRunRunsOnce(t *testing.T) {
	w := newWorld(t)
	c := New(Config{Name: "test", Dynamic: w.dyn, Handle: func(context.Context, string) (time.Duration, error) { return 0, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if err := c.Run(context.Background()); err == nil {
		t.Error("a second Run ran")
	}
	c.Add("after") // dropped, not blocking
}
