package install

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestChartNetworkPolicyAdmitsOnlyTheAPIServerToTheWebhook: off by default; when enabled, the
// webhook port admits only the listed CIDRs while the metrics, health, receiver and ui ports stay
// open, and an empty CIDR list is refused rather than rendered as a policy that shuts the
// apiserver out.
func TestChartNetworkPolicyAdmitsOnlyTheAPIServerToTheWebhook(t *testing.T) {
	for _, o := range renderChart(t).objs {
		if o.GetKind() == "NetworkPolicy" {
			t.Fatalf("the default values render NetworkPolicy %s", o.GetName())
		}
	}

	r := renderChart(t, "--set", "webhook.networkPolicy.enabled=true", "--set", "receiver.enabled=true", "--set", "ui.enabled=true",
		"--set-json", `webhook.networkPolicy.apiserverCIDRs=["10.0.0.0/28","192.168.10.5/32"]`)
	var np networkingv1.NetworkPolicy
	object(t, r.objs, "NetworkPolicy", chartRelease+"-webhook", &np)
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policy types %v, want Ingress only (egress to Git and the apiserver stays open)", np.Spec.PolicyTypes)
	}
	podLabels := r.deployment.Spec.Template.Labels
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("the policy selects %s=%s, which the daemon's Pod does not carry", k, v)
		}
	}
	if len(np.Spec.PodSelector.MatchLabels) == 0 {
		t.Error("the policy selects every Pod of the namespace")
	}

	// open[port] lists the sources allowed to reach port; "*" is every source.
	open := map[int32][]string{}
	for _, rule := range np.Spec.Ingress {
		sources := []string{"*"}
		if len(rule.From) > 0 {
			sources = nil
			for _, peer := range rule.From {
				if peer.IPBlock == nil || len(peer.IPBlock.Except) > 0 || peer.PodSelector != nil || peer.NamespaceSelector != nil {
					t.Fatalf("unexpected peer %+v", peer)
				}
				sources = append(sources, peer.IPBlock.CIDR)
			}
		}
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.Type != intstr.Int {
				t.Fatalf("rule port %+v is not a number", p)
			}
			open[p.Port.IntVal] = append(open[p.Port.IntVal], sources...)
		}
		if len(rule.Ports) == 0 {
			t.Fatalf("a rule admits %v to every port", sources)
		}
	}
	ports := map[string]int32{}
	for _, p := range r.deployment.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	if got := open[ports["webhook"]]; !slices.Equal(got, []string{"10.0.0.0/28", "192.168.10.5/32"}) {
		t.Errorf("the webhook port %d admits %v, want only the apiserver CIDRs", ports["webhook"], got)
	}
	for _, name := range []string{"metrics", "health", "receiver", "ui"} {
		if got := open[ports[name]]; !slices.Equal(got, []string{"*"}) {
			t.Errorf("the %s port %d admits %v, want every source", name, ports[name], got)
		}
	}

	_, err := runHelmTemplate(t, systemNamespace, "--set", "webhook.networkPolicy.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "webhook.networkPolicy.apiserverCIDRs") {
		t.Errorf("enabled without CIDRs: err = %v, want the chart to name webhook.networkPolicy.apiserverCIDRs", err)
	}
	off := renderChart(t, "--set", "webhook.enabled=false", "--set", "webhook.networkPolicy.enabled=true")
	for _, o := range off.objs {
		if o.GetKind() == "NetworkPolicy" {
			t.Errorf("with the webhook disabled the chart still renders NetworkPolicy %s", o.GetName())
		}
	}
}
