package install

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// tokenReviewRule is what the operator page adds to the daemon's ClusterRole with ui.auth=token:
// it checks the bearer token a person signs in with.
var tokenReviewRule = rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}

// TestChartOperatorPage: the page is off by default (no objects, no port, an empty
// --ui-bind-address); with ui.auth=token it listens on every interface behind a Service that
// selects the leader, and the daemon may create TokenReviews; with ui.auth=none it listens on
// loopback only, with nothing routed to it and no TokenReview permission.
func TestChartOperatorPage(t *testing.T) {
	selector := map[string]string{"app.kubernetes.io/name": "gitops-reverser", "app.kubernetes.io/instance": chartRelease}
	leader := maps.Clone(selector)
	leader[leaderLabel] = "true"
	cases := []struct {
		name        string
		args        []string
		bind, auth  string
		port        int32             // container port ui; 0: none
		service     map[string]string // selector of Service <fullname>-ui; nil: none
		ingressHost string            // host of Ingress <fullname>-ui; empty: none
		tokenReview bool
	}{
		{name: "default values render no ui objects", bind: "", auth: "token"},
		{name: "token auth serves every interface behind a Service on the leader",
			args: []string{"--set", "ui.enabled=true"},
			bind: ":9090", auth: "token", port: 9090, service: leader, tokenReview: true},
		{name: "another port",
			args: []string{"--set", "ui.enabled=true", "--set", "ui.port=9595"},
			bind: ":9595", auth: "token", port: 9595, service: leader, tokenReview: true},
		{name: "ingress routes every path to the ui Service",
			args: []string{"--set", "ui.enabled=true", "--set", "ui.ingress.enabled=true", "--set", "ui.ingress.host=gr.example.com"},
			bind: ":9090", auth: "token", port: 9090, service: leader, ingressHost: "gr.example.com", tokenReview: true},
		{name: "without leader election the Service selects the one Pod",
			args: []string{"--set", "ui.enabled=true", "--set", "leaderElection.enabled=false"},
			bind: ":9090", auth: "token", port: 9090, service: selector, tokenReview: true},
		{name: "auth none binds loopback only and renders no Service",
			args: []string{"--set", "ui.enabled=true", "--set", "ui.auth=none"},
			bind: "127.0.0.1:9090", auth: "none", port: 9090},
		{name: "auth none while disabled stays off",
			args: []string{"--set", "ui.auth=none"},
			bind: "", auth: "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, tc.args...)
			if got, ok := r.args["ui-bind-address"]; !ok || got != tc.bind {
				t.Errorf("--ui-bind-address=%q (passed %t), want %q", got, ok, tc.bind)
			}
			if got := r.args["ui-auth"]; got != tc.auth {
				t.Errorf("--ui-auth=%q, want %q", got, tc.auth)
			}
			c := r.deployment.Spec.Template.Spec.Containers[0]
			if got := containerPort(c, intstr.FromString("ui")); tc.port == 0 && got != -1 || tc.port != 0 && got != tc.port {
				t.Errorf("container port ui = %d, want %d (0: none)", got, tc.port)
			}

			name := chartRelease + "-ui"
			if tc.service == nil {
				for _, o := range r.objs {
					if strings.HasSuffix(o.GetName(), "-ui") {
						t.Errorf("renders %s %s", o.GetKind(), o.GetName())
					}
				}
			} else {
				var svc corev1.Service
				object(t, r.objs, "Service", name, &svc)
				if !maps.Equal(svc.Spec.Selector, tc.service) {
					t.Errorf("Service %s selects %v, want %v", name, svc.Spec.Selector, tc.service)
				}
				want := []corev1.ServicePort{{Name: "ui", Port: tc.port, TargetPort: intstr.FromString("ui"), Protocol: corev1.ProtocolTCP}}
				if diff := cmp.Diff(want, svc.Spec.Ports); svc.Spec.Type != corev1.ServiceTypeClusterIP || diff != "" {
					t.Errorf("Service %s of type %s, ports (-want +got):\n%s", name, svc.Spec.Type, diff)
				}
			}
			if tc.ingressHost == "" {
				if r.has("Ingress", name) {
					t.Errorf("renders Ingress %s", name)
				}
			} else {
				checkUIIngress(t, r, tc.ingressHost)
			}

			var role rbacv1.ClusterRole
			object(t, r.objs, "ClusterRole", chartRelease, &role)
			if got := slices.ContainsFunc(role.Rules, func(rule rbacv1.PolicyRule) bool {
				return slices.Contains(rule.Resources, "tokenreviews")
			}); got != tc.tokenReview {
				t.Errorf("the ClusterRole grants tokenreviews: %t, want %t", got, tc.tokenReview)
			}
			if tc.port != 0 {
				mustDaemonAccept(t, r)
			}
		})
	}
}

// checkUIIngress: the Ingress routes every path of host to the ui Service's named port.
func checkUIIngress(t *testing.T, r renderedChart, host string) {
	t.Helper()
	var ing networkingv1.Ingress
	object(t, r.objs, "Ingress", chartRelease+"-ui", &ing)
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != host || ing.Spec.Rules[0].HTTP == nil || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
		t.Fatalf("Ingress rules %+v, want one rule for %s with one path", ing.Spec.Rules, host)
	}
	p := ing.Spec.Rules[0].HTTP.Paths[0]
	prefix := networkingv1.PathTypePrefix
	want := networkingv1.HTTPIngressPath{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
		Service: &networkingv1.IngressServiceBackend{Name: chartRelease + "-ui", Port: networkingv1.ServiceBackendPort{Name: "ui"}}}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("Ingress path (-want +got):\n%s", diff)
	}
}

// TestChartOperatorPageAddsOnlyTokenReviews: with the page on (ui.auth=token) the daemon's
// ClusterRole is deploy/rbac.yaml's plus create on tokenreviews, nothing else; deploy/ serves no
// page, so its ServiceAccount may not create TokenReviews (TestShippedIdentityCannotReadForeignSecretsNorWrite).
func TestChartOperatorPageAddsOnlyTokenReviews(t *testing.T) {
	var deploy rbacv1.ClusterRole
	object(t, readObjects(t, "rbac.yaml"), "ClusterRole", "gitops-reverser", &deploy)
	r := renderChart(t, "--set", "ui.enabled=true")
	var got rbacv1.ClusterRole
	object(t, r.objs, "ClusterRole", chartRelease, &got)
	i := slices.IndexFunc(deploy.Rules, func(rule rbacv1.PolicyRule) bool { return slices.Contains(rule.Resources, "subjectaccessreviews") })
	if i < 0 {
		t.Fatal("deploy/rbac.yaml grants no subjectaccessreviews")
	}
	// Next to the SubjectAccessReviews the page asks for the same person.
	want := slices.Insert(slices.Clone(deploy.Rules), i+1, tokenReviewRule)
	if diff := cmp.Diff(want, got.Rules); diff != "" {
		t.Errorf("ClusterRole rules with ui.enabled (-deploy/rbac.yaml plus tokenreviews +chart):\n%s", diff)
	}
}

// TestChartRefusesUnsafeOrInvalidUISettings: the page without sign-in may not be routed to, its
// auth must be one of the two the daemon knows (the schema says so first, the template when the
// schema is skipped), and a certificate for a page that is off is a mistake.
func TestChartRefusesUnsafeOrInvalidUISettings(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // in the error
	}{
		{"auth none with an ingress",
			[]string{"--set", "ui.enabled=true", "--set", "ui.auth=none", "--set", "ui.ingress.enabled=true"},
			"set ui.ingress.enabled=false"},
		{"an unknown auth, by the schema",
			[]string{"--set", "ui.auth=basic"},
			"/ui/auth"},
		{"an unknown auth, by the template",
			[]string{"--skip-schema-validation", "--set", "ui.enabled=true", "--set", "ui.auth=basic"},
			`ui.auth must be token or none, got "basic"`},
		{"a cert dir while the page is off",
			[]string{"--set", "config.ui-cert-dir=/tls"},
			"config.ui-cert-dir is set but ui.enabled is false"},
		{"an unknown ui value",
			[]string{"--set", "ui.hostname=x"},
			"hostname"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runHelmTemplate(t, systemNamespace, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestChartGrantsTheWebhookConfigurationNamedAfterItsService: the daemon names its
// ValidatingWebhookConfiguration after its webhook Service (--webhook-service-name, the chart's
// full name), so two installs in one cluster each keep their own; the ClusterRole grants applying
// that one, and no other.
func TestChartGrantsTheWebhookConfigurationNamedAfterItsService(t *testing.T) {
	out := helmTemplate(t, systemNamespace, "--set", "fullnameOverride=team-b-reverser")
	objs := decodeObjects(t, []byte(out))
	var dep appsv1.Deployment
	object(t, objs, "Deployment", "team-b-reverser", &dep)
	if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--webhook-service-name=team-b-reverser") {
		t.Fatalf("the daemon is not told its Service: %v", dep.Spec.Template.Spec.Containers[0].Args)
	}
	var role rbacv1.ClusterRole
	object(t, objs, "ClusterRole", "team-b-reverser", &role)
	var names []string
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "validatingwebhookconfigurations") {
			names = append(names, r.ResourceNames...)
		}
	}
	if !slices.Equal(names, []string{"team-b-reverser"}) {
		t.Errorf("the ClusterRole grants validatingwebhookconfigurations %v, want only team-b-reverser", names)
	}
}
