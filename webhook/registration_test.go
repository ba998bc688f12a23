package webhook

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	whSecrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	whNamespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	whDeploys    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// ruleSummary is a rule as the assertions compare it.
type ruleSummary struct {
	group, version, resource string
	ops                      []admissionregistrationv1.OperationType
	scope                    admissionregistrationv1.ScopeType
}

func summarize(rules []admissionregistrationv1.RuleWithOperations) []ruleSummary {
	out := make([]ruleSummary, 0, len(rules))
	for _, r := range rules {
		out = append(out, ruleSummary{r.APIGroups[0], r.APIVersions[0], r.Resources[0], r.Operations, *r.Scope})
	}
	return out
}

func sameRules(a, b []ruleSummary) bool {
	return slices.EqualFunc(a, b, func(x, y ruleSummary) bool {
		return x.group == y.group && x.version == y.version && x.resource == y.resource &&
			x.scope == y.scope && slices.Equal(x.ops, y.ops)
	})
}

// getRegistration reads configuration name and checks it holds exactly one webhook.
func getRegistration(t *testing.T, name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	got, err := whAdmission(t).ValidatingWebhookConfigurations().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configuration: %v", err)
	}
	if len(got.Webhooks) != 1 {
		t.Fatalf("webhooks = %d, want 1", len(got.Webhooks))
	}
	return got
}

func TestRegistrationFollowsResources(t *testing.T) {
	ctx := context.Background()
	reg := NewRegistration(RegistrationConfig{Dynamic: whDynamic(t), Name: "webhook-follows",
		URL: "https://127.0.0.1:1/", Path: AdmissionPath, CABundle: func() []byte { return nil }})
	t.Cleanup(func() { _ = reg.Delete(context.Background()) })
	namespaced, cluster := admissionregistrationv1.NamespacedScope, admissionregistrationv1.ClusterScope
	cud := []admissionregistrationv1.OperationType{"CREATE", "DELETE", "UPDATE"}
	steps := []struct {
		name string
		rs   []Resource
		want []ruleSummary
	}{
		{"two resources", []Resource{
			{GVR: whSecrets, Namespaced: true, Namespace: "a", Operations: []string{"UPDATE"}},
			{GVR: whConfigMaps, Namespaced: true, Namespace: "a"},
		}, []ruleSummary{{"", "v1", "configmaps", cud, namespaced}, {"", "v1", "secrets", cud[2:], namespaced}}},
		{"same GVR twice merges operations", []Resource{
			{GVR: whDeploys, Namespaced: true, Namespace: "a", Operations: []string{"UPDATE"}},
			{GVR: whDeploys, Namespaced: true, Namespace: "b", Operations: []string{"CREATE", "UPDATE"}},
			{GVR: whNamespaces, Operations: []string{"DELETE"}},
		}, []ruleSummary{{"", "v1", "namespaces", cud[1:2], cluster},
			{"apps", "v1", "deployments", []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}, namespaced}}},
		{"one resource", []Resource{{GVR: whConfigMaps, Namespaced: true}}, []ruleSummary{{"", "v1", "configmaps", cud, namespaced}}},
		{"no resources keeps the webhook without rules", nil, []ruleSummary{}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if err := reg.Update(ctx, step.rs); err != nil {
				t.Fatal(err)
			}
			before := getRegistration(t, "webhook-follows")
			if got := summarize(before.Webhooks[0].Rules); !sameRules(got, step.want) {
				t.Fatalf("rules = %+v, want %+v", got, step.want)
			}
			reversed := slices.Clone(step.rs)
			slices.Reverse(reversed)
			if err := reg.Update(ctx, reversed); err != nil {
				t.Fatal(err)
			}
			if after := getRegistration(t, "webhook-follows"); after.ResourceVersion != before.ResourceVersion {
				t.Fatalf("unchanged update wrote: resourceVersion %s → %s", before.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}

func TestRegistrationSettingsAndDelete(t *testing.T) {
	ctx := context.Background()
	reg := NewRegistration(RegistrationConfig{Dynamic: whDynamic(t), Name: "webhook-settings",
		URL: "https://127.0.0.1:1/", Path: AdmissionPath})
	t.Cleanup(func() { _ = reg.Delete(context.Background()) })
	if err := reg.Update(ctx, []Resource{{GVR: whConfigMaps, Namespaced: true}}); err != nil {
		t.Fatal(err)
	}
	hook := getRegistration(t, "webhook-settings").Webhooks[0]
	if hook.Name != "gitops-reverser.configbutler.ai" || *hook.FailurePolicy != admissionregistrationv1.Ignore ||
		*hook.SideEffects != admissionregistrationv1.SideEffectClassNone || *hook.TimeoutSeconds != 2 ||
		*hook.MatchPolicy != admissionregistrationv1.Equivalent || !slices.Equal(hook.AdmissionReviewVersions, []string{"v1"}) {
		t.Errorf("webhook settings = %+v", hook)
	}
	if hook.ClientConfig.URL == nil || *hook.ClientConfig.URL != "https://127.0.0.1:1"+AdmissionPath {
		t.Errorf("client config = %+v, want the URL plus the admission path", hook.ClientConfig)
	}

	if err := reg.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := whAdmission(t).ValidatingWebhookConfigurations().Get(ctx, "webhook-settings", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("after Delete: err = %v, want NotFound", err)
	}
	if err := reg.Delete(ctx); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

func TestRegistrationInClusterUsesTheService(t *testing.T) {
	ctx := context.Background()
	ca := newStaticCerts(t, "gitops-reverser.ops.svc").ca
	reg := NewRegistration(RegistrationConfig{Dynamic: whDynamic(t), Name: "webhook-in-cluster",
		ServiceNamespace: "ops", ServiceName: "gitops-reverser", Path: AdmissionPath, CABundle: func() []byte { return ca }})
	t.Cleanup(func() { _ = reg.Delete(context.Background()) })
	if err := reg.Update(ctx, []Resource{{GVR: whNamespaces}}); err != nil {
		t.Fatal(err)
	}
	got, err := whAdmission(t).ValidatingWebhookConfigurations().Get(ctx, "webhook-in-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc := got.Webhooks[0].ClientConfig
	svc := cc.Service
	if cc.URL != nil || svc == nil || svc.Namespace != "ops" || svc.Name != "gitops-reverser" ||
		*svc.Path != AdmissionPath || *svc.Port != 9443 || string(cc.CABundle) != string(ca) {
		t.Fatalf("client config = %+v", cc)
	}
}
