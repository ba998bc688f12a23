package notify

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/crds"
)

// BenchmarkProposalToMessage is issue 61's figure: the time from write-back recording that it
// opened a proposal to its message arriving at a webhook, through the notifier and a real
// apiserver (the proposal, its destination and repository are read to fill the message in),
// alone, and beside three channels of the same namespace that fail (one answers 500, one never
// answers, one is not listening). Goal: at most 1 s.
func BenchmarkProposalToMessage(b *testing.B) {
	for range b.N {
		for _, failing := range []bool{false, true} {
			proposalToMessage(b, failing)
		}
	}
}

func proposalToMessage(b *testing.B, failing bool) {
	e := newEnv(b, Config{PageURL: "https://gitops.example.com"})
	ns := e.namespace("bench")
	s := newSink(b, nil)
	e.channel(ns, "hook", crds.ChannelWebhook, s.srv.URL, nil)
	e.rule(ns, "proposals", "hook", func(r *crds.NotifyRuleSpec) { r.Events = []crds.NotifyEventSelector{{Kind: crds.KindProposal}} })
	what := "alone"
	if failing {
		what = "beside three failing channels"
		release := make(chan struct{})
		b.Cleanup(func() { close(release) })
		bad := map[string]string{
			"errors": newSink(b, func(w http.ResponseWriter, _ *http.Request) bool {
				w.WriteHeader(http.StatusInternalServerError)
				return true
			}).srv.URL,
			"hangs": newSink(b, func(_ http.ResponseWriter, r *http.Request) bool {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return true
			}).srv.URL,
		}
		gone := newSink(b, nil)
		bad["gone"] = gone.srv.URL
		gone.srv.Close()
		for name, url := range bad {
			e.channel(ns, name, crds.ChannelWebhook, url, nil)
			e.rule(ns, name, name, nil)
		}
	}
	const rounds = 20
	var took []time.Duration
	for i := range rounds {
		p := e.proposal(ns, fmt.Sprintf("p-%02d", i), "apps", strings.Repeat(fmt.Sprintf("%x", i%16), 40))
		start := time.Now()
		e.opened(p)
		s.receives(b, i+1)
		took = append(took, s.arrived(i).Sub(start))
	}
	slices.Sort(took)
	fmt.Printf("notify: a proposal opened → its message at the webhook (%s), min/median/max of %d: %.1f/%.1f/%.1f ms (goal: at most 1 s)\n",
		what, rounds, ms(took[0]), ms(took[rounds/2]), ms(took[rounds-1]))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
