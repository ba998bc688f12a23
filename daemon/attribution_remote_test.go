package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/webhook"
)

// TestAttributionStateSurvivesRegistrationsMeanwhile reads how attribution stands on a cluster
// (what the RemoteCluster's status says) while its registrar's applies fail and succeed in turn,
// as a registration refused, then granted, then refused again does: every answer is one of the
// two states and none panics (a failure read twice could be gone at the second read). The window
// is a few instructions wide: without -race a run catches it now and then, with -race in a few
// hundred reads.
func TestAttributionStateSurvivesRegistrationsMeanwhile(t *testing.T) {
	const name, reads = "fleet/east", 1_000_000
	h := newRemoteHooks(&attribution{cfg: WebhookConfig{URL: "https://hub.example:9443"}})
	hook := &clusterHook{name: name, store: webhook.NewStore(webhook.StoreConfig{}), log: slog.New(slog.DiscardHandler)}
	h.hooks[name] = hook
	refused := errors.New("validatingwebhookconfigurations is forbidden")

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			hook.applied(refused)
			hook.applied(nil)
		}
	})
	defer wg.Wait()
	defer close(stop)
	for i := range reads {
		state, why, err := stateOf(h, name)
		if err != nil {
			t.Fatalf("read %d of the attribution state while the registration changed: %v", i, err)
		}
		switch {
		case state == crds.AttributionFailing && strings.Contains(why, refused.Error()):
		case state == crds.AttributionRegistered && why == "":
		default:
			t.Fatalf("read %d: attribution %s (%q), want Failing with the refusal or Registered", i, state, why)
		}
	}
}

// stateOf is h.state(name, 0), with a panic returned as an error.
func stateOf(h *remoteHooks, name string) (state, why string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	state, why = h.state(name, 0)
	return state, why, nil
}
