package ctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
)

// proposal is a Proposal as read (for -o yaml|json) and as typed (for the table).
type proposal struct {
	obj unstructured.Unstructured
	*crds.Proposal
}

// listProposals shows the Proposals named, or those of the namespace (of one destination with
// --destination, in one phase with --phase), oldest first.
func listProposals(ctx context.Context, s *session, names []string) error {
	var selector string
	if s.destination != "" {
		selector = crds.LabelDestination + "=" + s.destination
	}
	objs, err := s.fetch(ctx, crds.Proposals, "proposal", names, selector)
	if err != nil {
		return err
	}
	var shown []proposal
	for i := range objs {
		p, err := crds.FromUnstructured[crds.Proposal](&objs[i])
		if err != nil {
			return err
		}
		if s.phase == "" || strings.EqualFold(string(p.Status.Phase), s.phase) {
			shown = append(shown, proposal{objs[i], p})
		}
	}
	if len(names) == 0 {
		slices.SortStableFunc(shown, func(a, b proposal) int {
			return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
				cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
	}
	if s.output == outputYAML || s.output == outputJSON {
		out := make([]unstructured.Unstructured, len(shown))
		for i, p := range shown {
			out[i] = p.obj
		}
		return printObjects(s.stdout, s.output, out, len(names) == 1)
	}
	if len(shown) == 0 {
		s.noneFound()
		return nil
	}
	t := newTable(s.stdout, s.row("NAMESPACE",
		[]string{"NAME", "DESTINATION", "CHANGE", "KIND", "TARGET", "PHASE", "DECISION", "AGE"},
		[]string{"AUTHOR", "COMMIT", "DECIDED BY", "MESSAGE"})...)
	for _, p := range shown {
		target := p.Spec.Target.Name
		if p.Spec.Target.Namespace != "" {
			target = p.Spec.Target.Namespace + "/" + target
		}
		var decidedBy string
		if p.Spec.DecidedBy != nil {
			decidedBy = p.Spec.DecidedBy.Username
		}
		t.row(s.row(p.Namespace,
			[]string{p.Name, p.Spec.DestinationRef.Name, string(p.Spec.Change), p.Spec.Target.Kind, target,
				string(p.Status.Phase), string(p.Spec.Decision), age(p.CreationTimestamp.Time)},
			[]string{p.Spec.Author.Name, p.Spec.SourceCommit[:min(7, len(p.Spec.SourceCommit))], decidedBy, p.Status.Message})...)
	}
	return t.flush()
}

// diffProposal prints the diff of each Proposal named: from the live object to the file in Git.
func diffProposal(ctx context.Context, s *session, names []string) error {
	if len(names) == 0 {
		return usageErrorf("proposals diff needs the NAME of a Proposal (see proposals list)")
	}
	objs, err := s.fetch(ctx, crds.Proposals, "proposal", names, "")
	if err != nil {
		return err
	}
	for i := range objs {
		p, err := crds.FromUnstructured[crds.Proposal](&objs[i])
		if err != nil {
			return err
		}
		diff := p.Spec.Diff
		if diff != "" && !strings.HasSuffix(diff, "\n") {
			diff += "\n"
		}
		if _, err := fmt.Fprint(s.stdout, diff); err != nil {
			return err
		}
	}
	return nil
}

// pastTense is what a decision did, for the message after it was set.
var pastTense = map[crds.Decision]string{
	crds.DecisionApprove: "approved", crds.DecisionReject: "rejected", crds.DecisionIgnore: "ignored",
}

// decide sets spec.decision of each Proposal named, as the user: a merge patch that names them
// in spec.decidedBy (username, uid and groups as the apiserver knows them, and the Proposal's
// status.stamp), which the apiserver's admission policy checks, or writes itself. A Proposal that already ended
// (Applied, Rejected, Stale, Superseded) is not patched. It stops at the first refusal.
func decide(ctx context.Context, s *session, names []string, decision crds.Decision) error {
	if len(names) == 0 {
		return usageErrorf("proposals %s needs the NAME of a Proposal (see proposals list)", strings.ToLower(string(decision)))
	}
	me, err := s.whoami(ctx)
	if err != nil {
		return err
	}
	client := s.ourKind(crds.Proposals)
	for _, name := range names {
		key := s.namespace + "/" + name
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return failed("get proposal "+key, err)
		}
		p, err := crds.FromUnstructured[crds.Proposal](u)
		if err != nil {
			return err
		}
		switch p.Status.Phase {
		case "", crds.PhasePending, crds.PhaseIgnored:
		default:
			return errors.New("proposal " + key + " is " + string(p.Status.Phase) + ": only a Pending or Ignored one can be decided")
		}
		me.Stamp = p.Status.Stamp // what the validating policy alone asks for; the mutating one writes it
		if _, err := client.Patch(ctx, name, types.MergePatchType, crds.DecisionPatch(decision, me), metav1.PatchOptions{}); err != nil {
			return failed(fmt.Sprintf("%s proposal %s", strings.ToLower(string(decision)), key), err)
		}
		_, _ = fmt.Fprintf(s.stdout, "proposal.%s/%s %s by %s\n", crds.Group, name, pastTense[decision], me.Username)
	}
	return nil
}
