package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
)

// BenchmarkStartToFirstFile applies the configuration and 2,000 ConfigMaps before the daemon
// starts, as in production, and prints how long after the process starts the first file and then
// all 2,000 are on the remote, and the CPU the process used by then. With
// GITOPS_REVERSER_BENCH_LOG=1 it also prints the daemon's log, to see what the start waits for.
func BenchmarkStartToFirstFile(b *testing.B) {
	planes.Lend(b)
	for range b.N {
		m := newMirrorBench(b, fmt.Sprintf("bench-start-%d", time.Now().UnixNano()))
		m.create(0, 2000)
		warmKinds(b)
		start := time.Now()
		d := startDaemon(b, b.TempDir(), "--log-level", "debug")
		var first time.Duration
		deadline := start.Add(2 * time.Minute)
		for first == 0 && time.Now().Before(deadline) {
			if files, err := m.srv.Files("state", "main"); err == nil && hasPrefixed(files, "live/") {
				first = time.Since(start)
			}
			time.Sleep(10 * time.Millisecond) // a poll of the remote, not a synchronisation
		}
		all := m.converged(start)
		_, cpu := usage(b, d.Pid())
		report("start with 2,000 ConfigMaps and the config applied: process start → first file on the remote %.2f s, all 2,000 %.2f s (CPU %.2f s; %s)",
			first.Seconds(), all.Seconds(), cpu, beforeFirstFile)
		if os.Getenv("GITOPS_REVERSER_BENCH_LOG") != "" {
			fmt.Println(d.Output())
		}
	}
}

// warmKinds reads every kind of ours once, as a daemon that ran before would have: the apiserver
// creates the storage of a custom resource at its first request and asks that request and the
// next to come back a second later while its cache fills, which no restart in production sees.
func warmKinds(b *testing.B) {
	dyn := dynamic.NewForConfigOrDie(planes.Of(b).AdminConfig())
	for _, gvr := range []schema.GroupVersionResource{crds.GitRepoConfigs, crds.GitDestinations, crds.WatchRules,
		crds.ClusterWatchRules, crds.Proposals, crds.SyncRuns, crds.Receivers} {
		if _, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"}); err != nil {
			b.Fatal(err)
		}
	}
}

func hasPrefixed(files []string, prefix string) bool {
	for _, f := range files {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	return false
}
