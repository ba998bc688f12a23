package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/crds"
)

// maxDecisionBytes caps a decision's body: "decision=Approve" and little else.
const maxDecisionBytes = 1 << 10

// decide sets spec.decision of a Proposal as the person who asked, with their own token: the
// apiserver checks their RBAC and admission records them as the reviewer, exactly as when they
// use kubectl. The page itself grants nothing. Cross-origin requests were refused before this
// runs, and the token only ever comes in a header, which a page of another origin cannot set.
func (p *Page) decide(w http.ResponseWriter, r *http.Request) {
	v, err := p.auth.viewer(r)
	switch {
	case err != nil && !errors.Is(err, errNoToken) && !errors.Is(err, errBadToken):
		http.Error(w, "the token could not be checked: "+err.Error(), http.StatusServiceUnavailable)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	case v.readOnly():
		http.Error(w, "the page is read-only (--ui-auth=none): decide with kubectl, as yourself", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxDecisionBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "read the decision: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	decision := crds.Decision(r.PostForm.Get("decision"))
	if decision != crds.DecisionApprove && decision != crds.DecisionReject && decision != crds.DecisionIgnore {
		http.Error(w, fmt.Sprintf("decision must be %s, %s or %s, got %q", crds.DecisionApprove, crds.DecisionReject, crds.DecisionIgnore, decision),
			http.StatusBadRequest)
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	if err := p.patchDecision(ctx, v, ns, name, decision); err != nil {
		status := http.StatusBadGateway
		var apiErr apierrors.APIStatus
		if errors.As(err, &apiErr) && apiErr.Status().Code >= 400 {
			status = int(apiErr.Status().Code)
		}
		p.cfg.Log.Info("operator page: a decision was refused", "user", v.user.Username, "proposal", ns+"/"+name,
			"decision", decision, "status", status, "err", err)
		http.Error(w, "refused by Kubernetes: "+err.Error(), status)
		return
	}
	p.cfg.Log.Info("operator page: decision set", "user", v.user.Username, "proposal", ns+"/"+name, "decision", decision)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "%s set on %s/%s by %s; write-back acts on it now\n", decision, ns, name, v.user.Username)
}

// patchDecision merge-patches spec.decision with a client that carries the person's token and
// none of the daemon's credentials. The patch names the person in spec.decidedBy with the
// Proposal's status.stamp, as the apiserver's validating policy asks (where the mutating policy
// runs, it writes the same).
func (p *Page) patchDecision(ctx context.Context, v *viewer, namespace, name string, decision crds.Decision) error {
	cfg := rest.AnonymousClientConfig(p.cfg.Kube)
	cfg.BearerToken = v.token
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build a client for the viewer: %w", err)
	}
	proposals := client.Resource(crds.Proposals).Namespace(namespace)
	cur, err := proposals.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	// The stamp the validating policy alone asks the reviewer to carry (the mutating one writes it).
	stamp, _, _ := unstructured.NestedString(cur.Object, "status", "stamp")
	decidedBy := crds.Reviewer{Username: v.user.Username, UID: v.user.UID, Groups: v.user.Groups, Stamp: stamp}
	_, err = proposals.Patch(ctx, name, types.MergePatchType, crds.DecisionPatch(decision, decidedBy), metav1.PatchOptions{})
	return err
}
