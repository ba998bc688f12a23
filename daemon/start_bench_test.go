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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
)

// BenchmarkStartToFirstFile applies the configuration and 2,000 ConfigMaps before the daemon
// starts and prints how long after the process starts the first file and then all 2,000 are on
// the remote, and the CPU the process used by then, in three shapes: a restart as in production
// (the daemon's namespace there, write-back off), and a newcomer's local run (its namespace
// missing, which the daemon creates), with write-back off and with it on while its admission
// policies are being installed. With GITOPS_REVERSER_BENCH_LOG=1 it also prints the daemon's log, to see what the
// start waits for.
func BenchmarkStartToFirstFile(b *testing.B) {
	planes.Lend(b)
	for i := range b.N {
		for _, shape := range []struct {
			name      string
			writeBack bool
			flags     []string
			before    string
		}{
			{"a restart with the config in place", false, nil, beforeFirstFile},
			{"a local run, its namespace missing, write-back off", false,
				[]string{"--namespace", fmt.Sprintf("bench-home-%d-%d", i, time.Now().UnixNano()%1e6)}, beforeFirstFileNewcomer},
			{"a local run, its namespace missing, write-back on", true,
				[]string{"--namespace", fmt.Sprintf("bench-home-wb-%d-%d", i, time.Now().UnixNano()%1e6)}, beforeFirstFileNewcomer},
		} {
			m := newMirrorBench(b, fmt.Sprintf("bench-start-%d", time.Now().UnixNano()))
			if shape.writeBack {
				dyn := dynamic.NewForConfigOrDie(planes.Of(b).AdminConfig())
				if _, err := dyn.Resource(crds.GitDestinations).Namespace(m.ns).Patch(context.Background(), "dest", types.MergePatchType,
					[]byte(`{"spec":{"writeBack":{"enabled":true}}}`), metav1.PatchOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			m.create(0, 2000)
			warmKinds(b)
			start := time.Now()
			d := startDaemon(b, b.TempDir(), append([]string{"--log-level", "debug"}, shape.flags...)...)
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
			report("start with 2,000 ConfigMaps, %s: process start → first file on the remote %.2f s (goal ≤ 0.5 s), all 2,000 %.2f s (goal ≤ 1.0 s) (CPU %.2f s; %s)",
				shape.name, first.Seconds(), all.Seconds(), cpu, shape.before)
			if os.Getenv("GITOPS_REVERSER_BENCH_LOG") != "" {
				fmt.Println(d.Output())
			}
			d.Stop(b)
			m.forget()
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
