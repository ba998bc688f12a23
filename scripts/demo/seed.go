package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

const (
	demoNS   = "demo"
	daemonNS = "gitops-reverser-system"
	// demoWriter is the ServiceAccount the demo's WatchRule acts as.
	demoWriter = "apps-writer"
)

type demo struct {
	*cluster
	git         *testenv.GitServer
	metricsAddr string
	expected    []string // repository paths the mirror must write
}

func createNamespace(ctx context.Context, cfg *rest.Config, name string) error {
	admin := kubernetes.NewForConfigOrDie(cfg)
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// seed applies the sample configuration and then works on the cluster as alice and bob.
func (d *demo) seed(ctx context.Context) error {
	admin := kubernetes.NewForConfigOrDie(d.admin)
	step("applying a GitRepoConfig, a GitDestination and a WatchRule in namespace " + demoNS)
	if err := crds.WaitEstablished(ctx, d.admin, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		return err
	}
	if err := createNamespace(ctx, d.admin, demoNS); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-credentials", Namespace: demoNS},
		StringData: map[string]string{"username": d.git.Username, "password": d.git.Password}}
	if _, err := admin.CoreV1().Secrets(demoNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create secret: %w", err)
	}
	// Our own Role: the built-in "edit" ClusterRole is filled in by kube-controller-manager's
	// aggregation, which this minimal control plane does not run.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "app-editor", Namespace: demoNS},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: []string{"*"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
		}}
	if _, err := admin.RbacV1().Roles(demoNS).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create role: %w", err)
	}
	for _, user := range []string{"alice", "bob"} {
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-edit", Namespace: demoNS},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}},
		}
		if _, err := admin.RbacV1().RoleBindings(demoNS).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("grant %s: %w", user, err)
		}
	}
	// The ServiceAccount the WatchRule acts as: its Role bounds what the rule mirrors and what
	// write-back may apply, and its annotation says it agreed to act for the rule "apps".
	writer := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: demoWriter, Namespace: demoNS,
		Annotations: map[string]string{crds.AnnotationWatchRules: "apps"}}}
	if _, err := admin.CoreV1().ServiceAccounts(demoNS).Create(ctx, writer, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service account: %w", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: demoWriter + "-edit", Namespace: demoNS},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: demoWriter, Namespace: demoNS}},
	}
	if _, err := admin.RbacV1().RoleBindings(demoNS).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("grant %s: %w", demoWriter, err)
	}
	if err := d.applyConfig(ctx); err != nil {
		return err
	}
	for _, user := range []string{"alice", "bob"} {
		if err := waitAllowed(ctx, kubernetes.NewForConfigOrDie(d.as(user))); err != nil {
			return fmt.Errorf("%s's permissions: %w", user, err)
		}
	}
	step("waiting until the mirror watches namespace " + demoNS)
	if err := d.waitWatching(ctx, len(demoResources)); err != nil {
		return err
	}
	step("waiting until the apiserver calls the daemon's admission webhook")
	if err := d.waitWebhook(ctx, admin); err != nil {
		return err
	}
	return d.work(ctx)
}

// waitWatching waits until the mirror watches the rule's resources (the watches metric): what
// is made before would be found by its first list, and credited to the bot, not to its author.
func (d *demo) waitWatching(ctx context.Context, resources int) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		watches, _ := scrape(d.metricsAddr, "gitops_reverser_watches")
		return watches >= float64(resources), nil
	})
	if err != nil {
		return fmt.Errorf("the mirror did not start watching (see gitops-reverser's log): %w", err)
	}
	return nil
}

// waitWebhook writes throwaway ConfigMaps in namespace default (not mirrored) until the daemon's
// webhook has seen one: from then on every change is credited to whoever made it.
func (d *demo) waitWebhook(ctx context.Context, admin kubernetes.Interface) error {
	for i := 0; i < 600; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-probe-", Namespace: "default"}}
		if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("probe the webhook: %w", err)
		}
		if reviews, _ := scrape(d.metricsAddr, "gitops_reverser_admission_reviews_total"); reviews > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("the apiserver never called the admission webhook")
}

// scrape sums every series of one metric from the daemon's /metrics.
func scrape(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			if i := strings.LastIndexByte(rest, ' '); i >= 0 {
				v, _ := strconv.ParseFloat(rest[i+1:], 64)
				sum += v
			}
		}
	}
	return sum, nil
}

// waitAllowed waits until the RBAC authorizer has picked up the user's new RoleBinding.
func waitAllowed(ctx context.Context, client kubernetes.Interface) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: demoNS, Verb: "create", Resource: "configmaps"}}}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, nil
	})
}

// demoResources are what the demo's WatchRule mirrors.
var demoResources = []string{"configmaps", "deployments", "services"}

func (d *demo) applyConfig(ctx context.Context) error {
	dyn := dynamic.NewForConfigOrDie(d.admin)
	objects := []struct {
		gvr schema.GroupVersionResource
		obj any
	}{
		{crds.GitRepoConfigs, &crds.GitRepoConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster-state", Namespace: demoNS},
			Spec: crds.GitRepoConfigSpec{RepoURL: d.git.RepoURL("cluster-state"), AllowedBranches: []string{"main"},
				SecretRef: &crds.LocalReference{Name: "git-credentials"}}}},
		{crds.GitDestinations, &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: demoNS},
			Spec: crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "cluster-state"}, Branch: "main", BaseFolder: "clusters/demo"}}},
		{crds.WatchRules, &crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: demoNS},
			Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "demo"}, ServiceAccountName: demoWriter,
				Rules: []crds.ResourceRule{{Resources: demoResources}}}}},
	}
	for _, o := range objects {
		u, err := crds.ToUnstructured(o.obj)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(o.gvr).Namespace(demoNS).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s: %w", u.GetKind(), err)
		}
	}
	return nil
}

// work creates and edits demo objects as alice and bob.
func (d *demo) work(ctx context.Context) error {
	alice := kubernetes.NewForConfigOrDie(d.as("alice"))
	bob := kubernetes.NewForConfigOrDie(d.as("bob"))
	step("alice creates ConfigMap app-config and Deployment web")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: demoNS},
		Data: map[string]string{"LOG_LEVEL": "info", "FEATURES": "search,checkout\n"}}
	if _, err := alice.CoreV1().ConfigMaps(demoNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("alice creates the ConfigMap: %w", err)
	}
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: demoNS},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}},
		}}
	if _, err := alice.AppsV1().Deployments(demoNS).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("alice creates the Deployment: %w", err)
	}
	step("bob raises the log level and exposes web with a Service")
	patch := []byte(`{"data":{"LOG_LEVEL":"debug"}}`)
	if _, err := bob.CoreV1().ConfigMaps(demoNS).Patch(ctx, "app-config", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("bob edits the ConfigMap: %w", err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: demoNS},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := bob.CoreV1().Services(demoNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bob creates the Service: %w", err)
	}
	base := "clusters/demo/" + demoNS + "/"
	d.expected = []string{base + "configmaps/app-config.yaml", base + "deployments.apps/web.yaml", base + "services/web.yaml"}
	return nil
}
