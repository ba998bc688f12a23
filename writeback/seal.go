package writeback

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
)

// ReasonNotOpenedByDaemon marks a Proposal the daemon did not open (phase Foreign), in its
// Applied condition, its Event and proposals_refused_total{reason}.
const ReasonNotOpenedByDaemon = "NotOpenedByDaemon"

// Why a seal and not only the admission policy that lets nobody else create Proposals: the policy
// may be absent (--approver-policy=none, a cluster before 1.30, an admin deleting it), and a
// reviewer who may patch a real Proposal could change its path or target. The seal is an HMAC over
// everything the daemon wrote, keyed by a Secret of the daemon's namespace: a copy of it on
// another Proposal, or on a changed spec, does not verify.

// LoadKey reads (or creates) the key of the seals, once: nothing is opened, decided or held
// without it. The daemon asks before it runs the controller, so a key it cannot read shows as
// write-back degraded.
func (c *Controller) LoadKey(ctx context.Context) error {
	_, err := c.sealKey(ctx)
	return err
}

// sealKey is the key of the seals, read (or created) once through Config.SealKey.
func (c *Controller) sealKey(ctx context.Context) ([]byte, error) {
	if k := c.key.Load(); k != nil {
		return *k, nil
	}
	key, err := c.cfg.SealKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("the key that seals the daemon's Proposals: %w", err)
	}
	c.key.Store(&key)
	return key, nil
}

// seal is the daemon's proof that it wrote p, as the annotation holds it (hex).
func seal(key []byte, p *crds.Proposal) string { return hex.EncodeToString(sealMAC(key, p)) }

// sealMAC is an HMAC of p's namespace, name and spec, without the decision a reviewer sets.
func sealMAC(key []byte, p *crds.Proposal) []byte {
	spec := p.Spec
	spec.Decision, spec.DecidedBy = crds.DecisionNone, nil
	body, _ := json.Marshal(struct { // strings only: it always encodes
		Namespace, Name string
		Spec            crds.ProposalSpec
	}{p.Namespace, p.Name, spec})
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return mac.Sum(nil)
}

// sealed reports whether the daemon opened p, as it is now: its seal verifies, in constant time.
func sealed(key []byte, p *crds.Proposal) bool {
	got, err := hex.DecodeString(p.Annotations[crds.AnnotationSeal])
	return err == nil && hmac.Equal(got, sealMAC(key, p))
}

// ours reports whether the daemon opened p; false also while the key cannot be read.
func (c *Controller) ours(p *crds.Proposal) bool {
	k := c.key.Load()
	return k != nil && sealed(*k, p)
}

// disown marks a Proposal the daemon did not open as Foreign, once, with a Warning Event: it is
// never applied, holds no file and makes the mirror write nothing, whatever its decision.
func (c *Controller) disown(ctx context.Context, p *crds.Proposal) error {
	if p.Status.Phase == crds.PhaseForeign {
		return nil
	}
	msg := "not opened by gitops-reverser: its " + crds.AnnotationSeal + " annotation does not prove it (made by hand, or its spec " +
		"changed after it was opened); it is never applied and nothing is written to Git for it. Proposals are opened only from edits pushed to Git"
	c.cfg.Metrics.ProposalsRefused.WithLabelValues(ReasonNotOpenedByDaemon).Inc()
	c.cfg.Log.Warn("proposal not opened by the daemon; disowned", "proposal", p.Namespace+"/"+p.Name,
		"target", targetName(p.Spec.Target), "path", p.Spec.Path)
	_, err := c.setStatus(ctx, p, func(s *crds.ProposalStatus) {
		s.Phase, s.Message = crds.PhaseForeign, msg
		// Kept for the retention from now: its condition's time is when it was disowned.
		meta.RemoveStatusCondition(&s.Conditions, crds.ConditionApplied)
		setApplied(s, metav1.ConditionFalse, ReasonNotOpenedByDaemon, msg)
	})
	c.recorder.Event(crds.ObjectReference(crds.KindProposal, p), corev1.EventTypeWarning, ReasonNotOpenedByDaemon, msg)
	return err
}
