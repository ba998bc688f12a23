package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/daemon"
	"github.com/configbutler/gitops-reverser/testenv"
)

// leaderElectionRules are what leader election needs in the daemon's namespace: create the Lease
// (RBAC cannot limit create by name), read and renew exactly its own Lease, and label Pods.
func leaderElectionRules(lease string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{lease}, Verbs: []string{"get", "update", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "patch"}},
	}
}

// services are the chart's Services by name.
func (r renderedChart) services(t testing.TB) map[string]corev1.Service {
	t.Helper()
	out := map[string]corev1.Service{}
	for _, o := range r.objs {
		if o.GetKind() == "Service" {
			var s corev1.Service
			object(t, r.objs, "Service", o.GetName(), &s)
			out[s.Name] = s
		}
	}
	return out
}

// has says whether the chart renders kind/name.
func (r renderedChart) has(kind, name string) bool {
	return slices.ContainsFunc(r.objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind && o.GetName() == name })
}

// checkServiceSelectors: the webhook, receiver and ui Services select the leader label exactly
// when leaderOnly, the metrics Service never does, and each selects nothing else the Pod lacks.
func checkServiceSelectors(t *testing.T, r renderedChart, leaderOnly bool) {
	t.Helper()
	services := r.services(t)
	podLabels := r.deployment.Spec.Template.Labels
	if _, ok := podLabels[leaderLabel]; ok {
		t.Errorf("the Pod template carries %s: only the daemon may set it, on the leader's Pod", leaderLabel)
	}
	for name, wantLeader := range map[string]bool{
		chartRelease:               leaderOnly,
		chartRelease + "-receiver": leaderOnly,
		chartRelease + "-ui":       leaderOnly,
		chartRelease + "-metrics":  false,
	} {
		svc, ok := services[name]
		if !ok {
			t.Errorf("no Service %s", name)
			continue
		}
		want := ""
		if wantLeader {
			want = "true"
		}
		if got := svc.Spec.Selector[leaderLabel]; got != want {
			t.Errorf("Service %s selects %s=%q, want %q", name, leaderLabel, got, want)
		}
		for k, v := range svc.Spec.Selector {
			if k != leaderLabel && podLabels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the Pod template does not carry", name, k, v)
			}
		}
	}
	// Metrics stay reachable on every replica: only the metrics Service has the metrics port.
	for name, svc := range services {
		hasMetrics := slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "metrics" })
		if hasMetrics != (name == chartRelease+"-metrics") {
			t.Errorf("Service %s has the metrics port: %t, want it on %s-metrics only", name, hasMetrics, chartRelease)
		}
	}
}

// TestChartLeaderElectionByDefault: the default values run one daemon with leader election: a
// rolling update that starts the new Pod first, the Lease and Pod permissions in the release
// namespace, the Pod's name from the downward API, and the webhook and receiver Services pointed at
// the leader's Pod only while metrics reach every replica.
func TestChartLeaderElectionByDefault(t *testing.T) {
	r := renderChart(t, "--set", "receiver.enabled=true", "--set", "ui.enabled=true", "--set", "metrics.serviceMonitor.enabled=true")
	d := r.deployment.Spec
	if got := deref(d.Replicas); got != int32(1) {
		t.Errorf("replicas = %v, want 1", got)
	}
	checkRollingUpdate(t, d.Strategy)
	wantArgs := map[string]string{
		"leader-elect":                   "true",
		"leader-election-namespace":      systemNamespace,
		"leader-election-id":             chartRelease + "-leader",
		"leader-election-lease-duration": "15s",
		"leader-election-renew-deadline": "10s",
		"leader-election-retry-period":   "2s",
	}
	for name, want := range wantArgs {
		if got, ok := r.args[name]; !ok || got != want {
			t.Errorf("--%s=%q (passed %t), want %q", name, got, ok, want)
		}
	}
	if podNameEnv(r.deployment.Spec.Template.Spec.Containers[0]) == nil {
		t.Errorf("env %+v does not set %s from metadata.name", r.env, daemon.EnvVar("pod-name"))
	}

	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	object(t, r.objs, "Role", chartRelease+"-leader-election", &role)
	object(t, r.objs, "RoleBinding", chartRelease+"-leader-election", &binding)
	if diff := cmp.Diff(leaderElectionRules(chartRelease+"-leader"), role.Rules); diff != "" {
		t.Errorf("leader election rules (-want +got):\n%s", diff)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.deployment.Spec.Template.Spec.ServiceAccountName, Namespace: systemNamespace}}
	if role.Namespace != systemNamespace || binding.Namespace != systemNamespace || binding.RoleRef.Kind != "Role" ||
		binding.RoleRef.Name != role.Name || !slices.Equal(binding.Subjects, want) {
		t.Errorf("Role %s/%s bound by %s/%s (%+v) to %+v, want both in %s, bound to %+v",
			role.Namespace, role.Name, binding.Namespace, binding.Name, binding.RoleRef, binding.Subjects, systemNamespace, want)
	}

	checkServiceSelectors(t, r, true)
	// The ServiceMonitor scrapes through the metrics Service, not the leader-only webhook Service.
	var sm unstructured.Unstructured
	object(t, r.objs, "ServiceMonitor", chartRelease, &sm.Object)
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	services := r.services(t)
	for name, svc := range services {
		matches := len(selector) > 0
		for k, v := range selector {
			matches = matches && svc.Labels[k] == v
		}
		if matches != (name == chartRelease+"-metrics") {
			t.Errorf("the ServiceMonitor (%v) selects Service %s: %t, want the metrics Service only", selector, name, matches)
		}
	}

	if r.has("PodDisruptionBudget", chartRelease) {
		t.Error("one replica with a PodDisruptionBudget: a node drain could never evict it")
	}
	if a := r.deployment.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		t.Errorf("one replica with pod anti-affinity %+v", a.PodAntiAffinity)
	}

	t.Run("timings", func(t *testing.T) {
		r := renderChart(t, "--set", "leaderElection.leaseDuration=30s", "--set", "leaderElection.renewDeadline=20s",
			"--set", "leaderElection.retryPeriod=5s")
		for name, want := range map[string]string{"leader-election-lease-duration": "30s",
			"leader-election-renew-deadline": "20s", "leader-election-retry-period": "5s"} {
			if got := r.args[name]; got != want {
				t.Errorf("--%s=%q, want %q", name, got, want)
			}
		}
		mustDaemonAccept(t, r)
	})
	t.Run("lease named after the release", func(t *testing.T) {
		objs := decodeObjects(t, []byte(helmTemplate(t, systemNamespace, "--set", "fullnameOverride=reverser")))
		var role rbacv1.Role
		var deployment appsv1.Deployment
		object(t, objs, "Role", "reverser-leader-election", &role)
		object(t, objs, "Deployment", "reverser", &deployment)
		if args := deployment.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--leader-election-id=reverser-leader") {
			t.Errorf("args %v, want --leader-election-id=reverser-leader", args)
		}
		if diff := cmp.Diff(leaderElectionRules("reverser-leader"), role.Rules); diff != "" {
			t.Errorf("leader election rules (-want +got):\n%s", diff)
		}
	})
}

// checkRollingUpdate expects a rolling update that starts the new Pod first (it stands by), or,
// with oneAtATime (required anti-affinity: no node for a surge Pod), one that replaces one replica
// at a time.
func checkRollingUpdate(t *testing.T, s appsv1.DeploymentStrategy, oneAtATime ...bool) {
	t.Helper()
	surge, unavailable := "1", "0"
	if len(oneAtATime) > 0 && oneAtATime[0] {
		surge, unavailable = "0", "1"
	}
	if s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil || s.RollingUpdate.MaxSurge == nil ||
		s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxSurge.String() != surge || s.RollingUpdate.MaxUnavailable.String() != unavailable {
		t.Errorf("strategy %+v, want RollingUpdate with maxSurge %s and maxUnavailable %s", s, surge, unavailable)
	}
}

// TestChartHighAvailability: ha.enabled runs two replicas, keeps one through voluntary disruptions
// (PodDisruptionBudget), and spreads them over nodes, preferred (soft) or required (hard), next
// to any affinity of the values.
func TestChartHighAvailability(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		hard bool
	}{
		{"soft by default", nil, false},
		{"hard", []string{"--set", "ha.antiAffinity=hard"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, append([]string{"--set", "ha.enabled=true"}, tc.args...)...)
			spec := r.deployment.Spec
			if got := deref(spec.Replicas); got != int32(2) {
				t.Errorf("replicas = %v, want 2", got)
			}
			checkRollingUpdate(t, spec.Strategy, tc.hard)
			if r.args["leader-elect"] != "true" {
				t.Errorf("--leader-elect=%q, want true", r.args["leader-elect"])
			}
			// The replicas share the destinations, and reach each other at their Pods' IPs.
			if r.args["shards"] != "auto" || r.args["peer-address"] != "$(POD_IP):9443" {
				t.Errorf("--shards=%q --peer-address=%q, want auto and $(POD_IP):9443", r.args["shards"], r.args["peer-address"])
			}
			if ip := r.env["POD_IP"]; ip.ValueFrom == nil || ip.ValueFrom.FieldRef == nil || ip.ValueFrom.FieldRef.FieldPath != "status.podIP" {
				t.Errorf("env POD_IP %+v, want the Pod's status.podIP", ip)
			}
			podLabels := spec.Template.Labels

			var pdb policyv1.PodDisruptionBudget
			object(t, r.objs, "PodDisruptionBudget", chartRelease, &pdb)
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "1" || pdb.Spec.MaxUnavailable != nil {
				t.Errorf("PodDisruptionBudget minAvailable %v, maxUnavailable %v, want minAvailable 1 only", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
			}
			if pdb.Namespace != systemNamespace || pdb.Spec.Selector == nil || len(pdb.Spec.Selector.MatchLabels) == 0 ||
				!cmp.Equal(pdb.Spec.Selector.MatchLabels, spec.Selector.MatchLabels) {
				t.Errorf("PodDisruptionBudget in %s selects %+v, want the Deployment's selector %v in %s", pdb.Namespace, pdb.Spec.Selector, spec.Selector.MatchLabels, systemNamespace)
			}

			a := spec.Template.Spec.Affinity
			if a == nil || a.PodAntiAffinity == nil {
				t.Fatalf("affinity %+v, want pod anti-affinity", a)
			}
			var terms []corev1.PodAffinityTerm
			if tc.hard {
				terms = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
				if len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
					t.Errorf("hard anti-affinity also prefers %+v", a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
				}
			} else {
				for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
					terms = append(terms, w.PodAffinityTerm)
					if w.Weight <= 0 {
						t.Errorf("preferred anti-affinity weight %d", w.Weight)
					}
				}
				if len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
					t.Errorf("soft anti-affinity also requires %+v", a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
				}
			}
			if len(terms) != 1 {
				t.Fatalf("anti-affinity terms %+v, want one", terms)
			}
			term := terms[0]
			if term.TopologyKey != "kubernetes.io/hostname" || term.LabelSelector == nil || len(term.LabelSelector.MatchLabels) == 0 {
				t.Errorf("anti-affinity term %+v, want the daemon's Pods per kubernetes.io/hostname", term)
			}
			if term.LabelSelector != nil {
				for k, v := range term.LabelSelector.MatchLabels {
					if podLabels[k] != v {
						t.Errorf("anti-affinity selects %s=%s, which the Pod does not carry", k, v)
					}
				}
			}
			checkServiceSelectors(t, renderChart(t, append([]string{"--set", "ha.enabled=true", "--set", "receiver.enabled=true", "--set", "ui.enabled=true"}, tc.args...)...), true)
		})
	}

	t.Run("next to the values' affinity", func(t *testing.T) {
		r := renderChart(t, "--set", "ha.enabled=true", "--set-json",
			`affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["linux"]}]}]}}}`)
		a := r.deployment.Spec.Template.Spec.Affinity
		if a == nil || a.NodeAffinity == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Errorf("affinity %+v, want the values' nodeAffinity and the chart's preferred podAntiAffinity", a)
		}
	})
	t.Run("the values' own anti-affinity wins", func(t *testing.T) {
		r := renderChart(t, "--set", "ha.enabled=true", "--set-json",
			`affinity={"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app.kubernetes.io/name":"gitops-reverser"}},"topologyKey":"topology.kubernetes.io/zone"}]}}`)
		a := r.deployment.Spec.Template.Spec.Affinity
		if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 0 ||
			len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
			a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "topology.kubernetes.io/zone" {
			t.Errorf("affinity %+v, want exactly the values' podAntiAffinity", a)
		}
	})
	t.Run("refuses an unknown anti-affinity", func(t *testing.T) {
		_, err := runHelmTemplate(t, systemNamespace, "--skip-schema-validation", "--set", "ha.enabled=true", "--set", "ha.antiAffinity=strict")
		if err == nil || !strings.Contains(err.Error(), "ha.antiAffinity must be soft or hard") {
			t.Errorf("ha.antiAffinity=strict: err = %v, want the chart's refusal", err)
		}
	})
}

// TestChartWithoutLeaderElection: leaderElection.enabled=false is one daemon that never runs next
// to another (Recreate), with Services that select its Pod without a leader label and no Lease or
// Pod permissions; two replicas without leader election are refused.
func TestChartWithoutLeaderElection(t *testing.T) {
	r := renderChart(t, "--set", "leaderElection.enabled=false", "--set", "receiver.enabled=true", "--set", "ui.enabled=true")
	if got := deref(r.deployment.Spec.Replicas); got != int32(1) {
		t.Errorf("replicas = %v, want 1", got)
	}
	if s := r.deployment.Spec.Strategy; s.Type != appsv1.RecreateDeploymentStrategyType || s.RollingUpdate != nil {
		t.Errorf("strategy %+v, want Recreate: without leader election a rollout must not run two daemons", s)
	}
	if r.args["leader-elect"] != "false" {
		t.Errorf("--leader-elect=%q, want false", r.args["leader-elect"])
	}
	for _, kind := range []string{"Role", "RoleBinding"} {
		if r.has(kind, chartRelease+"-leader-election") {
			t.Errorf("renders %s %s-leader-election without leader election", kind, chartRelease)
		}
	}
	if r.has("PodDisruptionBudget", chartRelease) {
		t.Error("renders a PodDisruptionBudget for one replica")
	}
	checkServiceSelectors(t, r, false)
	mustDaemonAccept(t, r)

	_, err := runHelmTemplate(t, systemNamespace, "--set", "leaderElection.enabled=false", "--set", "ha.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "ha.enabled needs leaderElection.enabled") {
		t.Errorf("ha.enabled without leader election: err = %v, want the chart's refusal", err)
	}
}

// TestChartRefusesLeaderElectionConfigKeys: the leader election settings belong to the values'
// leaderElection (arguments) and pod-name to the Pod (its name); under `config` they would be
// overridden, so the chart and its schema refuse them.
func TestChartRefusesLeaderElectionConfigKeys(t *testing.T) {
	for _, key := range []string{"leader-elect", "leader-election-namespace", "leader-election-id", "leader-election-lease-duration",
		"leader-election-renew-deadline", "leader-election-retry-period", "pod-name"} {
		t.Run(key, func(t *testing.T) {
			_, err := runHelmTemplate(t, systemNamespace, "--skip-schema-validation", "--set-string", "config."+key+"=x")
			if err == nil || !strings.Contains(err.Error(), "config."+key+" is ") {
				t.Errorf("config.%s: err = %v, want the chart's refusal naming it", key, err)
			}
			if _, err := runHelmTemplate(t, systemNamespace, "--set-string", "config."+key+"=x"); err == nil ||
				!strings.Contains(err.Error(), key) {
				t.Errorf("config.%s passes values.schema.json: err = %v", key, err)
			}
		})
	}
}

// leaderIdentity is a ServiceAccount that runs the daemon, with the RBAC that grants it leader
// election in namespace.
type leaderIdentity struct {
	namespace, serviceAccount, lease string
}

func (id leaderIdentity) user() string {
	return "system:serviceaccount:" + id.namespace + ":" + id.serviceAccount
}

func (id leaderIdentity) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + id.namespace, "system:authenticated"}
}

// may asks the apiserver (a SubjectAccessReview) whether id may do attr.
func (id leaderIdentity) may(t testing.TB, kube kubernetes.Interface, attr authorizationv1.ResourceAttributes) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: id.user(), Groups: id.groups(), ResourceAttributes: &attr}}
	got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// TestLeaderElectionRBACAllowsOnlyTheLeaseAndPods applies the leader election RBAC of deploy/ and
// of the chart (in a release of another name and namespace) and asks the apiserver what the
// daemon's ServiceAccount may do: create Leases and read and renew its own, read, list and label
// Pods, all in its own namespace, and nothing more. For deploy/ it also makes the requests, as the
// ServiceAccount.
func TestLeaderElectionRBACAllowsOnlyTheLeaseAndPods(t *testing.T) {
	admin := adminKubeconfig(t)
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	ensureNamespace(t, kube, workloadNamespace)

	t.Run("deploy", func(t *testing.T) {
		kubectl(t, admin, nil, "apply", "-f", deployPath("namespace.yaml"), "-f", deployPath("rbac.yaml"))
		id := leaderIdentity{namespace: systemNamespace, serviceAccount: "gitops-reverser", lease: "gitops-reverser-leader"}
		checkLeaderElectionAccess(t, kube, id)
		t.Run("real requests", func(t *testing.T) { tryLeaderElection(t, kube, id) })
	})
	t.Run("chart", func(t *testing.T) {
		const namespace = "gitops-reverser-ha"
		ensureNamespace(t, kube, namespace)
		rendered := helmTemplate(t, namespace, "--set", "fullnameOverride=reverser")
		var keep []string
		for _, o := range decodeObjects(t, []byte(rendered)) {
			// Only the identity and its namespaced leader election RBAC: the ClusterRoles are the
			// other tests' business.
			if o.GetKind() == "ServiceAccount" || o.GetName() == "reverser-leader-election" {
				raw, err := o.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				keep = append(keep, string(raw))
			}
		}
		if len(keep) != 3 {
			t.Fatalf("the chart renders %d of the ServiceAccount, Role and RoleBinding:\n%s", len(keep), keep)
		}
		kubectl(t, admin, strings.NewReader(strings.Join(keep, "\n---\n")), "apply", "-f", "-")
		checkLeaderElectionAccess(t, kube, leaderIdentity{namespace: namespace, serviceAccount: "reverser", lease: "reverser-leader"})
	})
}

func checkLeaderElectionAccess(t *testing.T, kube kubernetes.Interface, id leaderIdentity) {
	t.Helper()
	type attr = authorizationv1.ResourceAttributes
	lease := func(verb, name, namespace string) attr {
		return attr{Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name, Namespace: namespace}
	}
	pods := func(verb, name, namespace string) attr {
		return attr{Verb: verb, Resource: "pods", Name: name, Namespace: namespace}
	}
	ns := id.namespace
	testenv.Eventually(t, time.Minute, "the leader election RoleBinding reaches the authorizer", func() (bool, string) {
		return id.may(t, kube, lease("update", id.lease, ns)), ""
	})
	cases := []struct {
		name    string
		attr    attr
		allowed bool
	}{
		{"gets its Lease", lease("get", id.lease, ns), true},
		{"renews its Lease", lease("update", id.lease, ns), true},
		{"creates Leases", lease("create", "", ns), true},
		{"cannot renew another Lease", lease("update", "kube-scheduler", ns), false},
		{"cannot get another Lease", lease("get", "kube-scheduler", ns), false},
		{"cannot patch its Lease", lease("patch", id.lease, ns), false},
		{"cannot delete its Lease", lease("delete", id.lease, ns), false},
		{"watches its Lease", lease("watch", id.lease, ns), true},
		{"cannot list Leases", lease("list", "", ns), false},
		{"cannot watch Leases", lease("watch", "", ns), false},
		{"cannot create Leases elsewhere", lease("create", "", "kube-system"), false},
		{"cannot renew a Lease of its name elsewhere", lease("update", id.lease, "kube-system"), false},
		{"cannot get its Pods (it only patches them)", pods("get", "gitops-reverser-0", ns), false},
		{"lists its Pods", pods("list", "", ns), true},
		{"labels its Pods", pods("patch", "gitops-reverser-0", ns), true},
		{"cannot label Pods elsewhere", pods("patch", "web-0", workloadNamespace), false},
		{"cannot list Pods elsewhere", pods("list", "", workloadNamespace), false},
		{"cannot list Pods cluster-wide", pods("list", "", ""), false},
		{"cannot watch its Pods", pods("watch", "", ns), false},
		{"cannot update its Pods", pods("update", "gitops-reverser-0", ns), false},
		{"cannot delete its Pods", pods("delete", "gitops-reverser-0", ns), false},
		{"cannot create Pods", pods("create", "", ns), false},
		{"cannot evict its Pods", attr{Verb: "create", Resource: "pods", Subresource: "eviction", Name: "gitops-reverser-0", Namespace: ns}, false},
		{"cannot exec into its Pods", attr{Verb: "create", Resource: "pods", Subresource: "exec", Name: "gitops-reverser-0", Namespace: ns}, false},
		{"cannot patch a Pod's status", attr{Verb: "patch", Resource: "pods", Subresource: "status", Name: "gitops-reverser-0", Namespace: ns}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := id.may(t, kube, tc.attr); got != tc.allowed {
				t.Errorf("allowed = %t, want %t for %+v", got, tc.allowed, tc.attr)
			}
		})
	}
}

// tryLeaderElection makes the leader's requests for real, as id: create, read and renew its Lease,
// list the labelled Pods and remove a label; the apiserver refuses the rest.
func tryLeaderElection(t *testing.T, kube kubernetes.Interface, id leaderIdentity) {
	ctx := context.Background()
	ns := id.namespace
	leases := kube.CoordinationV1().Leases(ns)
	// Nothing is left for a daemon that later runs on this control plane to wait out.
	cleanup := func() {
		for _, name := range []string{id.lease, "someone-else"} {
			_ = leases.Delete(ctx, name, metav1.DeleteOptions{})
		}
		_ = kube.CoreV1().Pods(ns).Delete(ctx, "leader-probe", metav1.DeleteOptions{GracePeriodSeconds: ref[int64](0)})
		_ = kube.CoreV1().Pods(workloadNamespace).Delete(ctx, "leader-probe", metav1.DeleteOptions{GracePeriodSeconds: ref[int64](0)})
	}
	cleanup()
	t.Cleanup(cleanup)

	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ref("someone")}}
	if _, err := leases.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Pod per namespace as the leader left it: labelled (restricted, as the namespace enforces).
	for _, podNS := range []string{ns, workloadNamespace} {
		if _, err := kube.CoreV1().Pods(podNS).Create(ctx, probePod(podNS), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	sa := kubernetes.NewForConfigOrDie(cp.ImpersonatingConfig(id.user(), id.groups()...))
	saLeases := sa.CoordinationV1().Leases(ns)
	unlabel := []byte(`{"metadata":{"labels":{"` + leaderLabel + `":null}}}`)
	var mine *coordinationv1.Lease
	cases := []apiCall{
		{"creates its Lease", func() error {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: id.lease, Namespace: ns},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ref("leader-probe"), LeaseDurationSeconds: ref[int32](15)}}
			_, err := saLeases.Create(ctx, l, metav1.CreateOptions{})
			return err
		}, true},
		{"gets its Lease", func() error {
			var err error
			mine, err = saLeases.Get(ctx, id.lease, metav1.GetOptions{})
			return err
		}, true},
		{"renews its Lease", func() error {
			if mine == nil {
				return fmt.Errorf("no Lease read")
			}
			mine.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, err := saLeases.Update(ctx, mine, metav1.UpdateOptions{})
			return err
		}, true},
		{"watches its Lease by name", func() error {
			w, err := saLeases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + id.lease})
			if err == nil {
				w.Stop()
			}
			return err
		}, true},
		{"cannot watch every Lease", func() error {
			w, err := saLeases.Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}, false},
		{"cannot take another Lease", func() error {
			l, err := leases.Get(ctx, "someone-else", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l.Spec.HolderIdentity = ref("leader-probe")
			_, err = saLeases.Update(ctx, l, metav1.UpdateOptions{})
			return err
		}, false},
		{"cannot delete its Lease", func() error { return saLeases.Delete(ctx, id.lease, metav1.DeleteOptions{}) }, false},
		{"lists the labelled Pods", func() error {
			list, err := sa.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: leaderLabel + "=true"})
			if err == nil && len(list.Items) != 1 {
				return fmt.Errorf("listed %d labelled Pods, want 1", len(list.Items))
			}
			return err
		}, true},
		{"removes a Pod's leader label", func() error {
			_, err := sa.CoreV1().Pods(ns).Patch(ctx, "leader-probe", types.MergePatchType, unlabel, metav1.PatchOptions{})
			return err
		}, true},
		{"cannot label a Pod elsewhere", func() error {
			_, err := sa.CoreV1().Pods(workloadNamespace).Patch(ctx, "leader-probe", types.MergePatchType, unlabel, metav1.PatchOptions{})
			return err
		}, false},
		{"cannot delete a Pod", func() error {
			return sa.CoreV1().Pods(ns).Delete(ctx, "leader-probe", metav1.DeleteOptions{})
		}, false},
	}
	checkCalls(t, cases)
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, "leader-probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pod.Labels[leaderLabel]; ok {
		t.Errorf("the Pod still carries %s after the patch: %v", leaderLabel, pod.Labels)
	}
}

// probePod is a Pod labelled as the leader, which meets the "restricted" Pod Security Standard.
// No kubelet runs here, so it is never started.
func probePod(namespace string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "leader-probe", Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "gitops-reverser", leaderLabel: "true"}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ref(true), RunAsUser: ref[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "probe", Image: "ghcr.io/configbutler/gitops-reverser:latest",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ref(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
}

func ref[T any](v T) *T { return &v }
