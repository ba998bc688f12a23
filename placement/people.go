package placement

// DefaultPerson is the policy of who is a person that OwnersOf takes when the caller has none:
// every field manager is a person but a status writer (subresource "status") and these, whose
// writes are a controller's or come from Git:
//
//   - kube-controller-manager (the HPA's rescale, the Deployment controller), kube-scheduler,
//     kubelet: Kubernetes' own controllers;
//   - kustomize-controller, helm-controller, source-controller (Flux), argocd-controller and
//     argocd-application-controller (Argo CD's sync): GitOps appliers, whose writes are already
//     in Git;
//   - gitops-reverser (crds.FieldManager): this daemon's write-back and restore, also from Git;
//     a restore applies a canonical folder's whole object, defaults and all, and would make
//     every default a person's;
//   - before-first-apply: the placeholder the apiserver names for the fields an object had before
//     its first server-side apply, by whoever set them.
//
// argocd-server is a person: it writes what a user asks in Argo CD's UI (edit the live manifest,
// run an action). kubectl's managers (kubectl, kubectl-edit, kubectl-set, kubectl-label,
// kubectl-annotate, kubectl-patch, kubectl-create, kubectl-replace, kubectl-rollout,
// kubectl-client-side-apply; kubectl scale, which names none, is "kubectl" on subresource
// "scale"), browsers' (Mozilla), k9s, helm (the CLI) and any manager not listed are people. The
// operation is not read.
func DefaultPerson(manager, _, subresource string) bool {
	if subresource == "status" {
		return false
	}
	switch manager {
	case "kube-controller-manager", "kube-scheduler", "kubelet",
		"kustomize-controller", "helm-controller", "source-controller",
		"argocd-controller", "argocd-application-controller",
		"gitops-reverser", "before-first-apply":
		return false
	}
	return true
}
