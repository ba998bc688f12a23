package daemon

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/testenv"
)

// BenchmarkFailover prints, with the default lease timing (15s / 10s / 2s), how long a standby
// takes to lead after the leader is killed (SIGKILL) and after it is stopped (SIGTERM), how long
// until a change made in the gap is in Git, and the standby's memory.
func BenchmarkFailover(b *testing.B) {
	planes.Lend(b)
	for i := range b.N {
		ns := fmt.Sprintf("bench-failover-%d", i)
		srv, kube := mirrorSetup(b, ns)
		a, bb, a2 := fmt.Sprintf("bench-a-%d", i), fmt.Sprintf("bench-b-%d", i), fmt.Sprintf("bench-c-%d", i)
		replicaPods(b, kube, a, bb, a2)
		lease := fmt.Sprintf("bench-failover-%d", i)
		ctx := context.Background()
		create := func(name string) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": "1"}}
			if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		inGit := func(name string) func() (bool, string) { return remoteHas(srv, "live/"+ns+"/configmaps/"+name+".yaml") }

		first := startReplica(b, a, lease)
		waitLeading(b, first, time.Minute)
		second := startReplica(b, bb, lease)
		waitStandingBy(b, second)
		create("before")
		testenv.Eventually(b, time.Minute, "first leader pushing", inGit("before"), first.FailFast())
		standbyRSS, _ := usage(b, second.Pid())

		first.Kill(b)
		killed := time.Now()
		create("in-the-gap")
		waitLeading(b, second, time.Minute)
		leading := time.Since(killed)
		testenv.Eventually(b, time.Minute, "the gap's change in Git", inGit("in-the-gap"), second.FailFast())
		written := time.Since(killed)

		third := startReplica(b, a2, lease)
		waitStandingBy(b, third)
		second.Signal(b, syscall.SIGTERM)
		termed := time.Now()
		waitLeading(b, third, time.Minute)
		handover := time.Since(termed)

		fmt.Printf("failover: SIGKILL → standby leads: %.1f s; → a change made after the kill is in Git: %.1f s\n", leading.Seconds(), written.Seconds())
		fmt.Printf("failover: SIGTERM → standby leads: %.1f s (the old leader's last push included)\n", handover.Seconds())
		fmt.Printf("failover: standby peak RSS: %.0f MiB\n", standbyRSS)
	}
}
