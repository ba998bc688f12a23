package ctl

import (
	"context"
	"strconv"

	"github.com/configbutler/gitops-reverser/crds"
)

// status shows the GitDestinations named, or all of the namespace: whether the mirror is Ready
// (and why not), its last push and the changes waiting for the next (status.git), and their
// write-back: on or off, pending proposals, last run, and its Ready
// condition, which says how an approval is known to come from its approver.
func status(ctx context.Context, s *session, names []string) error {
	objs, err := s.fetch(ctx, crds.GitDestinations, "gitdestination", names, "")
	if err != nil {
		return err
	}
	if s.output == outputYAML || s.output == outputJSON {
		return printObjects(s.stdout, s.output, objs, len(names) == 1)
	}
	if len(objs) == 0 {
		s.noneFound()
		return nil
	}
	t := newTable(s.stdout, s.row("NAMESPACE",
		[]string{"NAME", "READY", "REASON", "LAST PUSH", "QUEUE", "WRITE-BACK", "PENDING", "LAST RUN", "WB-READY", "WB-REASON"},
		[]string{"REPO", "BRANCH", "FOLDER", "PUSHED", "PUSH ERROR", "LAST SYNCRUN", "MESSAGE", "WB-MESSAGE"})...)
	for i := range objs {
		d, err := crds.FromUnstructured[crds.GitDestination](&objs[i])
		if err != nil {
			return err
		}
		ready, reason, message := condition(d.Status.Conditions, crds.ConditionReady)
		var pending, lastRun, lastSyncRun, wbReady, wbReason, wbMessage string
		if wb := d.Status.WriteBack; wb != nil {
			pending = strconv.Itoa(wb.PendingProposals)
			if wb.LastSyncTime != nil {
				lastRun = age(wb.LastSyncTime.Time)
			}
			lastSyncRun = wb.LastSyncRun
			wbReady, wbReason, wbMessage = condition(wb.Conditions, crds.ConditionReady)
		}
		var lastPush, queue, pushed, pushError string
		if g := d.Status.Git; g != nil {
			if g.LastPushTime != nil {
				lastPush = age(g.LastPushTime.Time)
			}
			queue = strconv.Itoa(g.Pending)
			if len(g.LastPushedCommit) >= 12 {
				pushed = g.LastPushedCommit[:12] + " by " + g.LastPushAuthor
			}
			pushError = g.LastError
		}
		repo := d.Spec.RepoRef.Name
		if ns := d.Spec.RepoRef.NamespaceOr(d.Namespace); ns != d.Namespace {
			repo = ns + "/" + repo
		}
		t.row(s.row(d.Namespace,
			[]string{d.Name, ready, reason, lastPush, queue, writeBackMode(d.Spec.WriteBack), pending, lastRun, wbReady, wbReason},
			[]string{repo, d.Spec.Branch, d.Spec.BaseFolder, pushed, pushError, lastSyncRun, message, wbMessage})...)
	}
	return t.flush()
}

// writeBackMode says in a word what spec.writeBack asks for.
func writeBackMode(wb *crds.WriteBack) string {
	switch {
	case wb == nil || !wb.Enabled:
		return "off"
	case wb.Suspend:
		return "suspended"
	case wb.AutoApply:
		return "auto-apply"
	default:
		return "on"
	}
}
