package install

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/daemon"
)

// TestDeployCRDsMatchEmbedded keeps deploy/crds (kustomize cannot load ../crds/yaml) byte-identical
// to the CRDs the binary embeds and installs, and every copy listed in the kustomization.
func TestDeployCRDsMatchEmbedded(t *testing.T) {
	embedded := yamlFileNames(t, filepath.Join("..", "crds", "yaml"))
	copies := yamlFileNames(t, deployPath("crds"))
	if len(embedded) == 0 || !slices.Equal(embedded, copies) {
		t.Fatalf("deploy/crds holds %v, crds/yaml holds %v: run `cp crds/yaml/*.yaml deploy/crds/`", copies, embedded)
	}
	kustomization := readKustomization(t)
	for _, name := range embedded {
		want, err := os.ReadFile(filepath.Join("..", "crds", "yaml", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(deployPath("crds", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/crds/%s differs from crds/yaml/%s: run `cp crds/yaml/*.yaml deploy/crds/`", name, name)
		}
		if !slices.Contains(kustomization.Resources, "crds/"+name) {
			t.Errorf("deploy/kustomization.yaml does not list crds/%s", name)
		}
	}
}

func yamlFileNames(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	slices.Sort(names)
	return names
}

type kustomization struct {
	Resources []string `json:"resources"`
}

func readKustomization(t testing.TB) kustomization {
	t.Helper()
	raw, err := os.ReadFile(deployPath("kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("deploy/kustomization.yaml: %v", err)
	}
	return k
}

// TestKustomizeManifestsPassServerDryRun renders deploy/ with kustomize and has the apiserver
// validate and admit every object (strict field validation, Pod Security "restricted") without
// persisting them.
func TestKustomizeManifestsPassServerDryRun(t *testing.T) {
	kubeconfig := adminKubeconfig(t)
	rendered, _ := kubectl(t, kubeconfig, nil, "kustomize", deployPath())
	objs := decodeObjects(t, []byte(rendered))
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(got)
	// Not the write-back role (write-back-rbac.yaml): it lets the daemon change the cluster, so
	// installing it is a separate, deliberate step.
	want := []string{
		"ClusterRole/gitops-reverser", "ClusterRole/gitops-reverser-destination-operator", "ClusterRole/gitops-reverser-proposal-reviewer",
		"ClusterRoleBinding/gitops-reverser",
		"ConfigMap/gitops-reverser-config",
		"CustomResourceDefinition/clusterwatchrules.configbutler.ai", "CustomResourceDefinition/gitdestinations.configbutler.ai",
		"CustomResourceDefinition/gitrepoconfigs.configbutler.ai",
		"CustomResourceDefinition/notifychannels.configbutler.ai", "CustomResourceDefinition/notifyrules.configbutler.ai",
		"CustomResourceDefinition/proposals.configbutler.ai",
		"CustomResourceDefinition/receivers.configbutler.ai", "CustomResourceDefinition/remoteclusters.configbutler.ai",
		"CustomResourceDefinition/syncruns.configbutler.ai", "CustomResourceDefinition/watchrules.configbutler.ai",
		"Deployment/gitops-reverser", "Namespace/" + systemNamespace, "Role/gitops-reverser", "Role/gitops-reverser-leader-election",
		"RoleBinding/gitops-reverser", "RoleBinding/gitops-reverser-leader-election",
		"Service/gitops-reverser", "Service/gitops-reverser-metrics", "ServiceAccount/gitops-reverser",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("kustomize renders\n%v\nwant\n%v", got, want)
	}

	// A server dry run does not create the Namespace, and the namespaced objects need it.
	kubectl(t, kubeconfig, nil, "apply", "-f", deployPath("namespace.yaml"))
	stdout, stderr := kubectl(t, kubeconfig, nil, "apply", "-k", deployPath(), "--dry-run=server")
	checkDryRun(t, objs, stdout, stderr)

	// The Pod Security check above is live: the same Deployment without its securityContext is
	// reported.
	var deployment appsv1.Deployment
	object(t, objs, "Deployment", "gitops-reverser", &deployment)
	deployment.Spec.Template.Spec.SecurityContext = nil
	deployment.Spec.Template.Spec.Containers[0].SecurityContext = nil
	lax, err := yaml.Marshal(&deployment)
	if err != nil {
		t.Fatal(err)
	}
	_, stderr = kubectl(t, kubeconfig, bytes.NewReader(lax), "apply", "-f", "-", "--dry-run=server")
	if !strings.Contains(stderr, `would violate PodSecurity "restricted`) {
		t.Errorf("a Deployment without securityContext passed the namespace's Pod Security warning:\n%s", stderr)
	}
}

// shipped are the manifests of deploy/ and the daemon configuration in its ConfigMap.
type shipped struct {
	deployment     appsv1.Deployment
	service        corev1.Service // the webhook's, the leader only
	metricsService corev1.Service // every replica
	config         corev1.ConfigMap
	serviceAccount corev1.ServiceAccount
	clusterBinding rbacv1.ClusterRoleBinding
	roleBinding    rbacv1.RoleBinding
	leaderRole     rbacv1.Role // the Lease and the Pods' leader label
	leaderBinding  rbacv1.RoleBinding
	settings       map[string]any // the config file's keys
}

func readShipped(t testing.TB) shipped {
	t.Helper()
	var s shipped
	object(t, readObjects(t, "deployment.yaml"), "Deployment", "gitops-reverser", &s.deployment)
	services := readObjects(t, "service.yaml")
	object(t, services, "Service", "gitops-reverser", &s.service)
	object(t, services, "Service", "gitops-reverser-metrics", &s.metricsService)
	object(t, readObjects(t, "config.yaml"), "ConfigMap", "gitops-reverser-config", &s.config)
	rbac := readObjects(t, "rbac.yaml")
	object(t, rbac, "ServiceAccount", "gitops-reverser", &s.serviceAccount)
	object(t, rbac, "ClusterRoleBinding", "gitops-reverser", &s.clusterBinding)
	object(t, rbac, "RoleBinding", "gitops-reverser", &s.roleBinding)
	object(t, rbac, "Role", "gitops-reverser-leader-election", &s.leaderRole)
	object(t, rbac, "RoleBinding", "gitops-reverser-leader-election", &s.leaderBinding)
	if err := yaml.Unmarshal([]byte(s.config.Data["config.yaml"]), &s.settings); err != nil {
		t.Fatalf("config.yaml in the ConfigMap: %v", err)
	}
	return s
}

// setting is what the daemon uses for key: the config file's value, else the flag's default.
func (s shipped) setting(t testing.TB, key string) string {
	t.Helper()
	if v, ok := s.settings[key]; ok {
		return fmt.Sprint(v)
	}
	for _, f := range daemon.Flags() {
		if f.Names()[0] != key {
			continue
		}
		if sf, ok := f.(*cli.StringFlag); ok {
			return sf.Value
		}
		t.Fatalf("setting %s is not a string flag", key)
	}
	t.Fatalf("no flag %s", key)
	return ""
}

func (s shipped) port(t testing.TB, key string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(s.setting(t, key))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return int32(n)
}

// containerPort resolves a probe or Service target port (a name or a number) in the container.
func containerPort(c corev1.Container, target intstr.IntOrString) int32 {
	if target.Type == intstr.Int {
		return target.IntVal
	}
	for _, p := range c.Ports {
		if p.Name == target.StrVal {
			return p.ContainerPort
		}
	}
	return -1
}

// TestShippedManifestsAgreeWithTheDaemon checks what the apiserver cannot: that the Deployment,
// Service, ConfigMap and RBAC fit together and fit the daemon's settings. In particular the
// daemon registers its webhook with the Service port equal to the port of webhook-bind-address.
func TestShippedManifestsAgreeWithTheDaemon(t *testing.T) {
	s := readShipped(t)
	known := map[string]bool{}
	for _, f := range daemon.Flags() {
		known[f.Names()[0]] = true
	}
	for key := range s.settings {
		if !known[key] || key == "config" {
			t.Errorf("the config file sets %q, which is not a setting of the daemon", key)
		}
	}
	if _, ok := s.settings["namespace"]; ok {
		t.Error("the config file sets namespace: the daemon must take its Pod's namespace, so an overlay can move it")
	}
	pod := s.deployment.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	mounts := map[string]corev1.Volume{} // mount path → volume
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name {
				mounts[m.MountPath] = v
			}
		}
	}

	// The config file reaches the daemon.
	var configPath string
	for _, a := range c.Args {
		if p, ok := strings.CutPrefix(a, "--config="); ok {
			configPath = p
		}
	}
	if v := mounts[filepath.Dir(configPath)]; configPath == "" || v.ConfigMap == nil || v.ConfigMap.Name != s.config.Name ||
		s.config.Data[filepath.Base(configPath)] == "" {
		t.Errorf("args %v: --config=%q is not the key of ConfigMap %s mounted in the container", c.Args, configPath, s.config.Name)
	}
	if v := mounts[s.setting(t, "work-dir")]; v.EmptyDir == nil {
		t.Errorf("work-dir %s is not an emptyDir mount (the root filesystem is read-only)", s.setting(t, "work-dir"))
	}

	// Ports: container, probes and Service all use the ports the daemon binds.
	ports := map[string]int32{
		"webhook": s.port(t, "webhook-bind-address"),
		"metrics": s.port(t, "metrics-bind-address"),
		"health":  s.port(t, "health-probe-bind-address"),
	}
	for name, want := range ports {
		if got := containerPort(c, intstr.FromString(name)); got != want {
			t.Errorf("containerPort %s = %d, want %d from the config", name, got, want)
		}
	}
	for _, probe := range []struct {
		name, path string
		p          *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if probe.p == nil || probe.p.HTTPGet == nil || probe.p.HTTPGet.Path != probe.path ||
			containerPort(c, probe.p.HTTPGet.Port) != ports["health"] {
			t.Errorf("%s probe %+v, want GET %s on the health port %d", probe.name, probe.p, probe.path, ports["health"])
		}
	}
	if s.service.Name != s.setting(t, "webhook-service-name") || s.service.Namespace != s.deployment.Namespace {
		t.Errorf("Service %s/%s, want %s/%s (webhook-service-name in the Deployment's namespace)",
			s.service.Namespace, s.service.Name, s.deployment.Namespace, s.setting(t, "webhook-service-name"))
	}
	// The webhook Service reaches only the leader, which labels its own Pod; the metrics Service
	// every replica (a standby reports gitops_reverser_leader 0).
	for _, svc := range []struct {
		service corev1.Service
		port    string
		leader  bool
	}{{s.service, "webhook", true}, {s.metricsService, "metrics", false}} {
		name := svc.service.Name
		if len(svc.service.Spec.Ports) != 1 {
			t.Errorf("Service %s has ports %+v, want only %s", name, svc.service.Spec.Ports, svc.port)
			continue
		}
		sp := svc.service.Spec.Ports[0]
		if sp.Name != svc.port || sp.Port != ports[svc.port] || containerPort(c, sp.TargetPort) != ports[svc.port] {
			t.Errorf("Service %s port %s: %d → %s, want %s: %d → container port %d", name, sp.Name, sp.Port, sp.TargetPort.String(), svc.port, ports[svc.port], ports[svc.port])
		}
		if svc.service.Namespace != s.deployment.Namespace {
			t.Errorf("Service %s is in %s, the Deployment in %s", name, svc.service.Namespace, s.deployment.Namespace)
		}
		want := ""
		if svc.leader {
			want = "true"
		}
		if got := svc.service.Spec.Selector[leaderLabel]; got != want {
			t.Errorf("Service %s selects %s=%q, want %q", name, leaderLabel, got, want)
		}
		for k, v := range svc.service.Spec.Selector {
			if k != leaderLabel && s.deployment.Spec.Template.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the Pod template does not carry", name, k, v)
			}
		}
		if _, ok := s.deployment.Spec.Template.Labels[leaderLabel]; ok {
			t.Errorf("the Pod template carries %s: only the daemon may set it, on the leader's Pod", leaderLabel)
		}
	}

	// Leader election: on, with this Pod's name (the leader labels its own Pod), and the Role
	// allows exactly the Lease the daemon uses, in its own namespace.
	if s.settings["leader-elect"] != true {
		t.Errorf("the config file sets leader-elect %v, want true", s.settings["leader-elect"])
	}
	if _, ok := s.settings["pod-name"]; ok {
		t.Error("the config file sets pod-name: every replica must take its own Pod's name")
	}
	if e := podNameEnv(c); e == nil {
		t.Errorf("the container's env %+v does not set %s from metadata.name", c.Env, daemon.EnvVar("pod-name"))
	}
	if ns := s.setting(t, "leader-election-namespace"); ns != "" && ns != s.deployment.Namespace {
		t.Errorf("leader-election-namespace %s, want the daemon's namespace %s (its Role)", ns, s.deployment.Namespace)
	}
	lease := s.setting(t, "leader-election-id")
	if i := slices.IndexFunc(s.leaderRole.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "leases") && len(r.ResourceNames) > 0
	}); i < 0 ||
		!slices.Equal(s.leaderRole.Rules[i].ResourceNames, []string{lease}) {
		t.Errorf("the leader election Role %+v does not name the Lease %s (leader-election-id)", s.leaderRole.Rules, lease)
	}
	if s.leaderRole.Namespace != s.deployment.Namespace || s.leaderBinding.Namespace != s.deployment.Namespace ||
		s.leaderBinding.RoleRef.Kind != "Role" || s.leaderBinding.RoleRef.Name != s.leaderRole.Name {
		t.Errorf("leader election Role %s/%s bound by %s/%s to %+v, want both in the daemon's namespace %s",
			s.leaderRole.Namespace, s.leaderRole.Name, s.leaderBinding.Namespace, s.leaderBinding.Name, s.leaderBinding.RoleRef, s.deployment.Namespace)
	}

	// The Pod runs as the ServiceAccount the RBAC binds.
	sa := s.serviceAccount
	if pod.ServiceAccountName != sa.Name || sa.Namespace != s.deployment.Namespace {
		t.Errorf("serviceAccountName %s in %s, the RBAC's ServiceAccount is %s/%s", pod.ServiceAccountName, s.deployment.Namespace, sa.Namespace, sa.Name)
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}
	for _, b := range []struct {
		name     string
		subjects []rbacv1.Subject
	}{{"ClusterRoleBinding", s.clusterBinding.Subjects}, {"RoleBinding", s.roleBinding.Subjects}, {"leader election RoleBinding", s.leaderBinding.Subjects}} {
		if !slices.Contains(b.subjects, subject) {
			t.Errorf("%s does not bind %s/%s", b.name, sa.Namespace, sa.Name)
		}
	}
	if s.roleBinding.Namespace != sa.Namespace {
		t.Errorf("the RoleBinding (Secrets) is in %s, not the daemon's namespace %s", s.roleBinding.Namespace, sa.Namespace)
	}
}

// leaderLabel marks the leader's Pod; the daemon sets it, and the Services that must reach only
// the leader select it.
const leaderLabel = "configbutler.ai/leader"

// podNameEnv is the container's variable that gives the daemon its Pod's name (pod-name) from the
// downward API, or nil.
func podNameEnv(c corev1.Container) *corev1.EnvVar {
	for i, e := range c.Env {
		if e.Name == daemon.EnvVar("pod-name") && e.Value == "" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			return &c.Env[i]
		}
	}
	return nil
}

// imageUID and imageGID are the image's user (make image, scripts/release), which has no passwd
// file: runAsNonRoot needs the numbers. scripts/release's tests keep the manifests and the chart on it.
const imageUID, imageGID int64 = 65532, 65532

// TestDeploymentRunsLockedDown pins the Deployment's shape: one replica, rolled out by starting the
// new Pod first (leader election hands over), the image's nonroot user, nothing writable but the
// work directory, no privileges, bounded resources.
func TestDeploymentRunsLockedDown(t *testing.T) {
	s := readShipped(t)
	pod := s.deployment.Spec.Template.Spec
	c := pod.Containers[0]
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc == nil || csc == nil || csc.Capabilities == nil {
		t.Fatalf("pod securityContext %+v, container securityContext %+v: both required", psc, csc)
	}
	uid, gid := imageUID, imageGID
	var maxSurge, maxUnavailable string
	if ru := s.deployment.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil && ru.MaxUnavailable != nil {
		maxSurge, maxUnavailable = ru.MaxSurge.String(), ru.MaxUnavailable.String()
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"replicas", deref(s.deployment.Spec.Replicas), int32(1)},
		{"strategy", s.deployment.Spec.Strategy.Type, appsv1.RollingUpdateDeploymentStrategyType},
		{"maxSurge", maxSurge, "1"},
		{"maxUnavailable", maxUnavailable, "0"},
		{"image", c.Image, "ghcr.io/configbutler/gitops-reverser:0.1.0"},
		{"pod runAsNonRoot", deref(psc.RunAsNonRoot), true},
		{"pod runAsUser (the image's USER)", deref(psc.RunAsUser), uid},
		{"pod runAsGroup (the image's USER)", deref(psc.RunAsGroup), gid},
		{"pod seccompProfile", psc.SeccompProfile, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		{"container runAsNonRoot", deref(csc.RunAsNonRoot), true},
		{"container runAsUser", deref(csc.RunAsUser), uid},
		{"readOnlyRootFilesystem", deref(csc.ReadOnlyRootFilesystem), true},
		{"allowPrivilegeEscalation", deref(csc.AllowPrivilegeEscalation), false},
		{"privileged", csc.Privileged != nil && *csc.Privileged, false},
		{"capabilities", fmt.Sprint(csc.Capabilities.Drop, csc.Capabilities.Add), fmt.Sprint([]corev1.Capability{"ALL"}, []corev1.Capability(nil))},
		{"container seccompProfile", csc.SeccompProfile, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		{"cpu request", c.Resources.Requests.Cpu().String(), quantity("50m")},
		{"memory request", c.Resources.Requests.Memory().String(), quantity("64Mi")},
		{"cpu limit", c.Resources.Limits.Cpu().String(), quantity("500m")},
		{"memory limit", c.Resources.Limits.Memory().String(), quantity("256Mi")},
		{"env (only the Pod's name; the namespace comes from the ServiceAccount)", len(c.Env) + len(c.EnvFrom), 1},
		{"the Pod's name from the downward API", podNameEnv(c) != nil, true},
		{"hostNetwork", pod.HostNetwork, false},
	}
	for _, ch := range checks {
		if fmt.Sprint(ch.got) != fmt.Sprint(ch.want) {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

func quantity(s string) string {
	q := resource.MustParse(s)
	return q.String()
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkDryRun fails the test unless kubectl's server dry run reported every object, and no Pod
// Security warning.
func checkDryRun(t *testing.T, objs []*unstructured.Unstructured, stdout, stderr string) {
	t.Helper()
	for _, o := range objs {
		ref := strings.ToLower(o.GetKind()) + "/" + o.GetName()
		if group := o.GroupVersionKind().Group; group != "" {
			ref = strings.ToLower(o.GetKind()) + "." + group + "/" + o.GetName()
		}
		if !slices.ContainsFunc(strings.Split(stdout, "\n"), func(line string) bool {
			return strings.HasPrefix(line, ref+" ") && strings.HasSuffix(line, "(server dry run)")
		}) {
			t.Errorf("server dry run did not report %s:\n%s", ref, stdout)
		}
	}
	if strings.Contains(stderr, "PodSecurity") {
		t.Errorf("the Deployment does not meet the namespace's Pod Security level:\n%s", stderr)
	}
}
