package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
)

// BenchmarkNotifyFailingChannels is issue 61's figure: the mirror's lag (2,000 ConfigMaps all
// updated, then single changes after a quiet spell) while a NotifyChannel of the namespace is
// suspended and resumed every 250 ms, each flip an Event (the notifier's own: it costs the mirror
// nothing): with no other channel, and with three channels that fail (one answers 500, one never
// answers, one is not listening) told of every Event of the namespace, duplicates included. Goal:
// the two equal within noise. The daemon is started as a newcomer starts it.
func BenchmarkNotifyFailingChannels(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		for _, failing := range []bool{false, true} {
			notifyLag(b, failing)
		}
	}
}

func notifyLag(b *testing.B, failing bool) {
	m := newMirrorBench(b, fmt.Sprintf("bench-notify-%d", time.Now().UnixNano()))
	m.create(0, 2000)
	what := "no notification channel"
	stopChannels := func() {}
	if failing {
		what = "three failing channels (500, no answer, not listening) told of every Event"
		stopChannels = failingChannels(b, m.ns)
	}
	stopFlips := flipChannel(b, m.ns)
	d := startDaemon(b, b.TempDir(), "--namespace", fmt.Sprintf("bench-home-%d", time.Now().UnixNano()))
	m.waitMatched(2 * time.Minute)
	m.update(0, 2000, 1)
	update := m.converged(time.Now())
	var single []time.Duration
	for round := range 10 {
		time.Sleep(2 * time.Second) // a quiet spell longer than the 1.5 s quiet period
		at := time.Now()
		m.patch("cm-00000", round+2)
		single = append(single, m.waitMatched(time.Minute).Sub(at))
	}
	slices.Sort(single)
	failed, dropped := metricSum(b, d, "gitops_reverser_notifications_failed_total"), metricSum(b, d, "gitops_reverser_notifications_dropped_total")
	stopFlips()
	stopChannels()
	d.Stop(b)
	forgetNotifications(b, m.ns) // the next run's daemon must not be told of these
	report("notifications: a channel suspended and resumed every 250 ms, %s; newcomer start", what)
	report("  update all 2,000 → remote matches %.2f s; one change after a quiet spell → on the remote, min/median/max of 10: %d/%d/%d ms; messages failed %.0f, dropped %.0f",
		update.Seconds(), single[0].Milliseconds(), single[len(single)/2].Milliseconds(), single[len(single)-1].Milliseconds(), failed, dropped)
}

// failingChannels makes three channels that fail and a rule each selecting every Event of ns;
// the returned stop closes their servers.
func failingChannels(b *testing.B, ns string) (stop func()) {
	ctx := context.Background()
	cfg := planes.Of(b).AdminConfig()
	kube, dyn := kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
	release := make(chan struct{})
	errors := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	hangs := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for name, url := range map[string]string{"errors": errors.URL, "hangs": hangs.URL, "gone": gone.URL} {
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			StringData: map[string]string{crds.ChannelAddressKey: url}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		createAs(b, dyn, crds.NotifyChannels, &crds.NotifyChannel{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: crds.NotifyChannelSpec{Type: crds.ChannelWebhook, SecretRef: crds.LocalReference{Name: name}}})
		createAs(b, dyn, crds.NotifyRules, &crds.NotifyRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: crds.NotifyRuleSpec{ChannelRef: crds.LocalReference{Name: name}, DuplicateWindow: &metav1.Duration{Duration: time.Millisecond}}})
	}
	return func() {
		close(release)
		errors.Close()
		hangs.Close()
	}
}

// flipChannel makes a NotifyChannel of ns and suspends and resumes it every 250 ms (each flip
// changes its Ready condition: an Event) until the returned stop.
func flipChannel(b *testing.B, ns string) (stop func()) {
	ctx := context.Background()
	cfg := planes.Of(b).AdminConfig()
	kube, dyn := kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "flips", Namespace: ns},
		StringData: map[string]string{crds.ChannelAddressKey: "http://127.0.0.1:9/"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	createAs(b, dyn, crds.NotifyChannels, &crds.NotifyChannel{ObjectMeta: metav1.ObjectMeta{Name: "flips", Namespace: ns},
		Spec: crds.NotifyChannelSpec{Type: crds.ChannelWebhook, SecretRef: crds.LocalReference{Name: "flips"}}})
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, i%2 == 0)
			_, _ = dyn.Resource(crds.NotifyChannels).Namespace(ns).Patch(ctx, "flips", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// forgetNotifications deletes the NotifyRules and NotifyChannels of ns.
func forgetNotifications(b *testing.B, ns string) {
	dyn := dynamic.NewForConfigOrDie(planes.Of(b).AdminConfig())
	for _, gvr := range []schema.GroupVersionResource{crds.NotifyRules, crds.NotifyChannels} {
		if err := dyn.Resource(gvr).Namespace(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
