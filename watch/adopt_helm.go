package watch

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// releaseOf names the Helm release that rendered obj, as the labels and annotations the
// releasing tool stamps on it say: Flux's helm-controller (a HelmRelease), Helm itself (a
// release), or Argo CD (an Application, by its tracking annotation); "" when none did.
func releaseOf(obj *unstructured.Unstructured) string {
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	if name := labels["helm.toolkit.fluxcd.io/name"]; name != "" {
		return "the HelmRelease " + qualified(labels["helm.toolkit.fluxcd.io/namespace"], name)
	}
	if labels["app.kubernetes.io/managed-by"] == "Helm" {
		if name := annotations["meta.helm.sh/release-name"]; name != "" {
			return "the Helm release " + qualified(annotations["meta.helm.sh/release-namespace"], name)
		}
		return "a Helm release"
	}
	if id := annotations["argocd.argoproj.io/tracking-id"]; id != "" {
		app, _, _ := strings.Cut(id, ":")
		return "the Argo CD Application " + app
	}
	return ""
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
