package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestOptionalPartWarnsOncePerProblemAndRecoversOnce(t *testing.T) {
	var log bytes.Buffer
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "degraded"}, []string{"part"})
	o := newOptionalParts(gauge, slog.New(slog.NewTextHandler(&log, nil)))
	o.track("attribution", "changes are credited to the bot")
	if got := testutil.ToFloat64(gauge.WithLabelValues("attribution")); got != 0 || len(o.report()) != 0 {
		t.Fatalf("a tracked part starts degraded: gauge %v, report %v", got, o.report())
	}

	missing := problem{what: "no namespace", fix: "create it"}
	forbidden := problem{what: "forbidden", fix: "grant it"}
	for _, p := range []problem{missing, missing, forbidden, missing, forbidden} {
		o.degraded("attribution", p)
	}
	if got := testutil.ToFloat64(gauge.WithLabelValues("attribution")); got != 1 {
		t.Errorf("gauge %v while degraded, want 1", got)
	}
	for _, p := range []problem{missing, forbidden} {
		if n := strings.Count(log.String(), fmt.Sprintf("fix=%q", p.fix)); n != 1 {
			t.Errorf("problem %q logged %d times, want once", p.what, n)
		}
	}
	if got := o.report(); len(got) != 1 || !strings.Contains(got[0], "5 failed attempts, retrying") || !strings.Contains(got[0], "forbidden; fix: grant it") {
		t.Errorf("report %q, want the latest problem and the attempts", got)
	}

	o.fine("attribution")
	o.fine("attribution")
	if n := strings.Count(log.String(), "attribution recovered"); n != 1 {
		t.Errorf("recovery logged %d times, want once", n)
	}
	if got := testutil.ToFloat64(gauge.WithLabelValues("attribution")); got != 0 || len(o.report()) != 0 {
		t.Errorf("after recovery: gauge %v, report %v", got, o.report())
	}
	o.degraded("attribution", missing) // a new spell warns again
	if n := strings.Count(log.String(), `fix="create it"`); n != 2 {
		t.Errorf("a problem after recovery logged %d times in all, want 2", n)
	}
	o.degraded("attribution", problem{what: "unreachable", fix: "set the URL", final: true})
	if got := o.report(); len(got) != 1 || !strings.Contains(got[0], "(not retried)") {
		t.Errorf("report %q, want a final problem marked not retried", got)
	}
}

func TestAttributionProblemsNameTheFix(t *testing.T) {
	const ns = "ops"
	cfg := WebhookConfig{BindAddress: ":9443"}
	secrets := schema.GroupResource{Resource: "secrets"}
	hooks := schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}
	cases := []struct {
		name string
		got  problem
		fix  string
	}{
		{"missing namespace", secretProblem(ns, fmt.Errorf("write: %w", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ops"))),
			"create the namespace ops or set --namespace"},
		{"a missing Secret is not a missing namespace", secretProblem(ns, apierrors.NewNotFound(secrets, "tls")),
			"check that the Kubernetes API answers"},
		{"no permission on Secrets", secretProblem(ns, apierrors.NewForbidden(secrets, "tls", errors.New("rbac"))),
			"grant the daemon get, create and update on secrets in the namespace ops"},
		{"no permission on the registration", registrationProblem("gitops-reverser", apierrors.NewForbidden(hooks, "gitops-reverser", errors.New("rbac"))),
			"grant the daemon apply (create and patch) on validatingwebhookconfigurations named gitops-reverser"},
		{"outside the cluster without a URL", unreachableProblem(cfg),
			"set --webhook-url=https://<address the apiserver can reach>:9443"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.HasPrefix(tc.got.fix, tc.fix) {
				t.Errorf("fix %q, want it to start with %q", tc.got.fix, tc.fix)
			}
		})
	}
}
