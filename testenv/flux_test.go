package testenv

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fluxTimeout bounds each wait for Flux: a clone, an artifact and an apply, on a shared machine.
const fluxTimeout = 2 * time.Minute

// The podinfo base and its production overlay, as a Flux repository lays them out.
const (
	podinfoBase = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment.yaml
`
	podinfoDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
spec:
  replicas: 1
  selector:
    matchLabels: {app: podinfo}
  template:
    metadata:
      labels: {app: podinfo}
    spec:
      containers:
        - name: podinfo
          image: ghcr.io/stefanprodan/podinfo:6.0.0
`
	podinfoProduction = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: prod
resources:
  - ../base/podinfo
images:
  - name: ghcr.io/stefanprodan/podinfo
    newTag: %s
replicas:
  - name: podinfo
    count: 2
`
)

// TestFluxAppliesAKustomizationFromTheGitServer runs the real Flux against a control plane of its
// own and the Git server: the production overlay of a commit reaches the cluster with the
// overlay's namespace, image tag and replicas, applied by kustomize-controller, and so does the
// tag of the next commit.
func TestFluxAppliesAKustomizationFromTheGitServer(t *testing.T) {
	plane, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	srv := MustGitServer(t, "flux", "flux-password", "fleet")
	author := Signature{Name: "Fleet Admin", Email: "admin@example.com"}
	if _, err := srv.PushCommit("fleet", "main", author, "podinfo in production", map[string]string{
		"apps/base/podinfo/kustomization.yaml": podinfoBase,
		"apps/base/podinfo/deployment.yaml":    podinfoDeployment,
		"apps/production/kustomization.yaml":   fmt.Sprintf(podinfoProduction, "6.1.0"),
	}, nil); err != nil {
		t.Fatal(err)
	}

	flux := StartFlux(t, plane)
	flux.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: prod}\n")
	flux.Sync(t, FluxSync{Namespace: "flux-system", Name: "fleet", URL: srv.RepoURL("fleet"),
		Username: srv.Username, Password: srv.Password, Path: "./apps/production"})
	client := mustClient(t, plane.AdminConfig())
	podinfoIs := func(tag string) func() (bool, string) {
		return func() (bool, string) {
			d, err := client.AppsV1().Deployments("prod").Get(context.Background(), "podinfo", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			image := d.Spec.Template.Spec.Containers[0].Image
			replicas := *d.Spec.Replicas
			return image == "ghcr.io/stefanprodan/podinfo:"+tag && replicas == 2 && appliedByFlux(d),
				fmt.Sprintf("image %s, %d replicas, managers %v", image, replicas, managers(d))
		}
	}
	Eventually(t, fluxTimeout, "podinfo 6.1.0 with 2 replicas in prod", podinfoIs("6.1.0"), flux.FailFast())

	sha, err := srv.PushCommit("fleet", "main", author, "podinfo 6.2.0", map[string]string{
		"apps/production/kustomization.yaml": fmt.Sprintf(podinfoProduction, "6.2.0"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, fluxTimeout, "podinfo 6.2.0 in prod", podinfoIs("6.2.0"), flux.FailFast())
	Eventually(t, fluxTimeout, "the Kustomization's last applied revision at the new commit", func() (bool, string) {
		applied := flux.Kubectl(t, "get", "kustomization", "fleet", "-n", "flux-system", "-o", "jsonpath={.status.lastAppliedRevision}")
		return applied == "main@sha1:"+sha, applied
	}, flux.FailFast())
}

// appliedByFlux says whether kustomize-controller owns fields of d (server-side apply).
func appliedByFlux(d *appsv1.Deployment) bool {
	return slices.Contains(managers(d), "kustomize-controller")
}

// managers are the field managers of d's managed fields.
func managers(d *appsv1.Deployment) []string {
	var names []string
	for _, m := range d.ManagedFields {
		names = append(names, m.Manager)
	}
	return names
}
