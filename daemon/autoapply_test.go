package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAFailedAutoApplyIsTriedAgain: an automatic apply that does not reach the apiserver (a
// webhook the apiserver must call for the ConfigMap does not answer) is tried again, waiting
// longer each time, and made once the webhook is back, with no person involved; one that keeps
// failing waits for a person after five attempts, and says so in its status.
func TestAFailedAutoApplyIsTriedAgain(t *testing.T) {
	planes.Lend(t)
	w := newWBWorld(t, "wb-retry", crds.WriteBack{Enabled: true, AutoApply: true}, nil)
	w.configMap("flaky", map[string]string{"color": "blue"})
	w.configMap("stuck", map[string]string{"color": "blue"})
	flakyDown := w.webhookDown("flaky")
	w.webhookDown("stuck")
	flaky, stuck := w.cmPath("flaky"), w.cmPath("stuck")
	edit := w.edit(map[string]string{
		flaky: w.replace(w.liveYAML("flaky"), "color: blue", "color: green"),
		stuck: w.replace(w.liveYAML("stuck"), "color: blue", "color: green"),
	})
	w.syncUntilProposedBy(edit, flaky, stuck)
	w.waitProposal(flaky, "a failed automatic apply of flaky, to be tried again", func(p *crds.Proposal) bool {
		return p.Status.AutoApplyAttempts >= 1 && p.Status.AutoApplyRetryAt != nil
	})
	if err := w.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), flakyDown, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p := w.waitProposal(flaky, "flaky applied automatically once its webhook is gone", func(p *crds.Proposal) bool {
		return p.Status.Phase == crds.PhaseApplied
	})
	if !p.Status.AutoApplied || p.Status.ReviewedBy != nil {
		t.Errorf("flaky applied with autoApplied %v, reviewed by %v: want automatic", p.Status.AutoApplied, p.Status.ReviewedBy)
	}
	testenv.Eventually(t, time.Minute, "flaky green", func() (bool, string) {
		got := w.liveColor("flaky")
		return got == "green", got
	}, w.d.FailFast())

	p = w.waitProposal(stuck, "stuck left to a person after five attempts", func(p *crds.Proposal) bool {
		return p.Status.AutoApplyAttempts == 5
	})
	c := meta.FindStatusCondition(p.Status.Conditions, crds.ConditionApplied)
	if p.Status.Phase != crds.PhasePending || p.Status.AutoApplyRetryAt != nil || c == nil ||
		!strings.Contains(c.Message, "not applied automatically after 5 attempts") {
		t.Errorf("stuck after five attempts: phase %s, retry at %v, condition %+v", p.Status.Phase, p.Status.AutoApplyRetryAt, c)
	}
	if got := w.liveColor("stuck"); got != "blue" {
		t.Errorf("stuck is %q, want blue: nothing reached it", got)
	}
	// A proposal left pending would be the oldest one the daemons of later tests export: the
	// daemon stops first, so its runs open none again.
	w.d.Stop(t)
	if err := w.dyn.Resource(crds.Proposals).Namespace(w.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}

// webhookDown has the apiserver call a webhook that does not answer (nothing listens on its
// port) before it changes the ConfigMap name of the world's namespace, failing the change. It
// returns the webhook configuration's name; it is deleted when the test ends.
func (w *wbWorld) webhookDown(name string) string {
	w.t.Helper()
	config := fmt.Sprintf("down-%s-%s", w.ns, name)
	fail, none, timeout := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(1)
	url := "https://127.0.0.1:1/never"
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: config},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    name + ".down.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": w.ns}},
			MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: "only-" + name, Expression: fmt.Sprintf("request.name == %q", name)}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
		}},
	}
	if _, err := w.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), vwc, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.root.Cleanup(func() {
		_ = w.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), config, metav1.DeleteOptions{})
	})
	return config
}

// syncUntilProposedBy asks for runs until each path has a proposal from commit.
func (w *wbWorld) syncUntilProposedBy(commit string, paths ...string) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, fmt.Sprintf("proposals of %d files", len(paths)), func() (bool, string) {
		found := map[string]bool{}
		for _, p := range w.proposals() {
			if p.Spec.SourceCommit == commit {
				found[p.Spec.Path] = true
			}
		}
		for _, path := range paths {
			if !found[path] {
				w.syncNow()
				return false, fmt.Sprintf("proposed: %v", found)
			}
		}
		return true, ""
	}, w.d.FailFast())
}
