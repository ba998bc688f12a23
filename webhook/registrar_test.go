package webhook

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
)

// runRegistrar runs r until the test ends, and waits for Run to return then.
func runRegistrar(t *testing.T, r *Registrar) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	t.Cleanup(func() { stop(); wg.Wait() })
}

// eventually polls cond every 20 ms until it holds, failing after 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// registered reads configuration name; nil while it does not exist.
func registered(t *testing.T, name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	got, err := whAdmission(t).ValidatingWebhookConfigurations().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || len(got.Webhooks) != 1 {
		return nil
	}
	return got
}

func hasRules(t *testing.T, name string, want []ruleSummary) bool {
	t.Helper()
	got := registered(t, name)
	return got != nil && sameRules(summarize(got.Webhooks[0].Rules), want)
}

func TestRegistrarAppliesTheLatestResourcesAndFollowsCARotation(t *testing.T) {
	ctx := context.Background()
	ns := whNamespace(t, "webhook-registrar")
	clock := &whClock{}
	clock.Set(time.Now())
	var reg *Registrar
	certs, err := NewSelfManaged(SelfManagedConfig{Dynamic: whDynamic(t), Namespace: ns, SecretName: whSecret(t, ns, "registrar-tls"),
		ExtraHosts: []string{"127.0.0.1"}, Now: clock.Now, CheckInterval: 10 * time.Millisecond,
		OnRotate: func() { reg.CARotated() }}, whLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	const name = "webhook-registrar"
	registration := NewRegistration(RegistrationConfig{Dynamic: whDynamic(t), Name: name,
		URL: "https://127.0.0.1:1", Path: AdmissionPath, CABundle: certs.CABundle})
	t.Cleanup(func() { _ = registration.Delete(context.Background()) })
	reg = NewRegistrar(RegistrarConfig{Registration: registration, Log: whLogger()})

	namespaced := admissionregistrationv1.NamespacedScope
	all := []admissionregistrationv1.OperationType{"CREATE", "DELETE", "UPDATE"}
	// Set before Run, as the mirror may report its resources before attribution has started:
	// only the latest counts.
	reg.SetResources([]Resource{{GVR: whSecrets, Namespaced: true}})
	reg.SetResources([]Resource{{GVR: whConfigMaps, Namespaced: true}})
	runRegistrar(t, reg)
	eventually(t, "the latest resources registered", func() bool {
		return hasRules(t, name, []ruleSummary{{"", "v1", "configmaps", all, namespaced}})
	})
	if got := registered(t, name).Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, certs.CABundle()) {
		t.Fatal("registered without the certificate source's CA bundle")
	}

	reg.SetResources([]Resource{{GVR: whDeploys, Namespaced: true, Operations: []string{"UPDATE"}}})
	eventually(t, "changed resources registered", func() bool {
		return hasRules(t, name, []ruleSummary{{"apps", "v1", "deployments", all[2:], namespaced}})
	})

	// Near the CA's end, SelfManaged's Run renews it and tells the registrar, which re-applies
	// the registration with the new bundle and the same rules.
	oldBundle := certs.CABundle()
	clock.Advance(caValidity - servingValidity)
	var wg sync.WaitGroup
	rotateCtx, stopRotation := context.WithCancel(ctx)
	wg.Go(func() { _ = certs.Run(rotateCtx) })
	defer func() { stopRotation(); wg.Wait() }()
	eventually(t, "the renewed CA bundle registered", func() bool {
		got := registered(t, name)
		return got != nil && !bytes.Equal(got.Webhooks[0].ClientConfig.CABundle, oldBundle) &&
			bytes.Equal(got.Webhooks[0].ClientConfig.CABundle, certs.CABundle())
	})
	if !hasRules(t, name, []ruleSummary{{"apps", "v1", "deployments", all[2:], namespaced}}) {
		t.Fatal("the CA rotation changed the rules")
	}
}

// TestRegistrarRetriesUntilItMayApply: without permission the apply fails and is retried with
// backoff; once the permission is granted, the registration lands and OnApply says so.
func TestRegistrarRetriesUntilItMayApply(t *testing.T) {
	const name, user = "webhook-registrar-rbac", "registrar-without-rbac"
	admission, err := dynamic.NewForConfig(cp.ImpersonatingConfig(user))
	if err != nil {
		t.Fatal(err)
	}
	registration := NewRegistration(RegistrationConfig{Dynamic: admission, Name: name, URL: "https://127.0.0.1:1", Path: AdmissionPath})
	t.Cleanup(func() {
		_ = NewRegistration(RegistrationConfig{Dynamic: whDynamic(t), Name: name}).Delete(context.Background())
	})
	var failures, successes atomic.Int32
	reg := NewRegistrar(RegistrarConfig{Registration: registration, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		OnApply: func(err error) {
			if err != nil {
				failures.Add(1)
			} else {
				successes.Add(1)
			}
		}})
	reg.SetResources([]Resource{{GVR: whConfigMaps, Namespaced: true}})
	runRegistrar(t, reg)
	eventually(t, "two failed applies", func() bool { return failures.Load() >= 2 })
	if successes.Load() != 0 || registered(t, name) != nil {
		t.Fatal("applied without permission")
	}

	grantRegistration(t, name, user)
	eventually(t, "the registration applied once permitted", func() bool {
		return successes.Load() > 0 && registered(t, name) != nil
	})
}

// grantRegistration lets user apply the ValidatingWebhookConfiguration name, as the shipped
// ClusterRole lets the daemon.
func grantRegistration(t *testing.T, name, user string) {
	t.Helper()
	ctx := context.Background()
	rbac, err := rbacv1client.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{name}, Verbs: []string{"create", "patch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}
