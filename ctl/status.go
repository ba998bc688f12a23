package ctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
)

// status shows the GitDestinations named, or all of the namespace: whether the mirror is Ready
// (and why not), its last push and the changes waiting for the next (status.git), and their
// write-back: on or off, pending proposals, last run, and its Ready
// condition, which says how an approval is known to come from its approver. Under the table, a
// line for each destination that delivers by pull request says what its request is.
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
		[]string{"REPO", "BRANCH", "FOLDER", "CLUSTER", "PUSHED", "PUSH ERROR", "LAST SYNCRUN", "MESSAGE", "WB-MESSAGE"})...)
	var requests []string
	for i := range objs {
		d, err := crds.FromUnstructured[crds.GitDestination](&objs[i])
		if err != nil {
			return err
		}
		ready, reason, message := condition(d.Status.Conditions, crds.ConditionReady)
		var pending, lastRun, lastSyncRun, wbReady, wbReason, wbMessage string
		if wb := d.Status.WriteBack; wb != nil {
			pending = strconv.Itoa(wb.PendingProposals)
			lastRun = ageOf(wb.LastSyncTime)
			lastSyncRun = wb.LastSyncRun
			wbReady, wbReason, wbMessage = condition(wb.Conditions, crds.ConditionReady)
		}
		var lastPush, queue, pushed, pushError string
		if g := d.Status.Git; g != nil {
			lastPush = ageOf(g.LastPushTime)
			queue = strconv.Itoa(g.Pending)
			if len(g.LastPushedCommit) >= 12 {
				pushed = g.LastPushedCommit[:12] + " by " + g.LastPushAuthor
			}
			pushError = g.LastError
		}
		t.row(s.row(d.Namespace,
			[]string{d.Name, ready, reason, lastPush, queue, writeBackMode(d.Spec.WriteBack), pending, lastRun, wbReady, wbReason},
			[]string{reference(d.Namespace, &d.Spec.RepoRef), d.Spec.Branch, d.Spec.BaseFolder, reference(d.Namespace, d.Spec.ClusterRef),
				pushed, pushError, lastSyncRun, message, wbMessage})...)
		if line := requestLine(d); line != "" {
			requests = append(requests, s.objectName(d.Namespace, d.Name)+": "+line)
		}
		for _, line := range adoptedLines(d) {
			requests = append(requests, s.objectName(d.Namespace, d.Name)+": "+line)
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	if err := printRequests(s.stdout, requests); err != nil || len(names) > 0 {
		return err
	}
	if err := clusters(ctx, s); err != nil {
		return err
	}
	return channels(ctx, s)
}

// reference names the object ref points at from namespace: without the namespace when it is
// the same; "" for no reference.
func reference(namespace string, ref *crds.NamespacedReference) string {
	if ref == nil {
		return ""
	}
	if ns := ref.NamespaceOr(namespace); ns != namespace {
		return ns + "/" + ref.Name
	}
	return ref.Name
}

// clusters shows, under the destinations, the RemoteClusters of the namespace (or all): whether
// each is Ready and why not, its apiserver, its watches, whether its changes are credited to
// their authors, and when a watch of it last saw a change. Nothing when there are none (or the
// kind is not installed).
func clusters(ctx context.Context, s *session) error {
	list, err := section[crds.RemoteCluster](ctx, s, crds.RemoteClusters)
	if err != nil || len(list) == 0 {
		return err
	}
	t := newTable(s.stdout, s.row("NAMESPACE",
		[]string{"CLUSTER", "READY", "REASON", "SERVER", "WATCHES", "ATTRIBUTION", "LAST EVENT"},
		[]string{"VERSION", "RESOURCES", "MESSAGE"})...)
	for _, c := range list {
		ready, reason, message := condition(c.Status.Conditions, crds.ConditionReady)
		t.row(s.row(c.Namespace,
			[]string{c.Name, ready, reason, c.Status.Server, strconv.Itoa(c.Status.Watches), c.Status.Attribution, ageOf(c.Status.LastEventTime)},
			[]string{c.Status.Version, strconv.Itoa(c.Status.Resources), message})...)
	}
	return t.flush()
}

// channels shows, under the destinations and clusters, the NotifyChannels of the namespace (or
// all): whether each is Ready and why not, its type, when it last sent, and what it sent, failed
// and dropped. Nothing when there are none (or the kind is not installed or not the user's).
func channels(ctx context.Context, s *session) error {
	list, err := section[crds.NotifyChannel](ctx, s, crds.NotifyChannels)
	if err != nil || len(list) == 0 {
		return err
	}
	t := newTable(s.stdout, s.row("NAMESPACE",
		[]string{"CHANNEL", "TYPE", "READY", "REASON", "LAST SENT", "SENT", "FAILED", "DROPPED"},
		[]string{"MESSAGE"})...)
	for _, c := range list {
		ready, reason, message := condition(c.Status.Conditions, crds.ConditionReady)
		st := c.Status
		t.row(s.row(c.Namespace,
			[]string{c.Name, c.Spec.Type, ready, reason, ageOf(st.LastSentTime), strconv.FormatInt(st.Sent, 10), strconv.FormatInt(st.Failed, 10), strconv.FormatInt(st.Dropped, 10)},
			[]string{message})...)
	}
	return t.flush()
}

// section lists the objects of gvr in the session's namespace (or all) for a table of their own
// under the destinations, after a blank line; none (without the line) when there are none, the
// kind is not installed, or the user may not list it: the destinations are the status.
func section[T any](ctx context.Context, s *session, gvr schema.GroupVersionResource) ([]*T, error) {
	list, err := s.ourKind(gvr).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || err == nil && len(list.Items) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, failed("list "+gvr.Resource+" in "+s.where(), err)
	}
	out := make([]*T, len(list.Items))
	for i := range list.Items {
		if out[i], err = crds.FromUnstructured[T](&list.Items[i]); err != nil {
			return nil, err
		}
	}
	if _, err := fmt.Fprintln(s.stdout); err != nil {
		return nil, fmt.Errorf("write the %s: %w", gvr.Resource, err)
	}
	return out, nil
}

// objectName names an object in a line of its own: with its namespace when the session lists
// every namespace.
func (s *session) objectName(namespace, name string) string {
	if s.allNamespaces {
		return namespace + "/" + name
	}
	return name
}

// requestLine says what the pull request of a destination that delivers by one is: "request #7
// open (3 files waiting, opened 2h ago): https://...", or "no request open (head ...)" when none
// is known or the last one ended with nothing left waiting. "" for a destination that pushes
// directly. What the daemon wrote into its status is printed without control characters, which
// could drive the terminal.
func requestLine(d *crds.GitDestination) string {
	head, pr, ok := d.ShownRequest()
	switch {
	case !ok:
		return ""
	case pr == nil:
		return "no request open (head " + printable(head) + ")"
	}
	details := files(pr.ChangesWaiting) + " waiting"
	if pr.OpenedAt != nil {
		details += ", opened " + age(pr.OpenedAt.Time) + " ago"
	}
	line := fmt.Sprintf("request #%d %s (%s)", pr.Number, printable(pr.State), details)
	if pr.URL != "" {
		line += ": " + printable(pr.URL)
	}
	return line
}

// files counts files in words: "1 file", "3 files".
func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return strconv.Itoa(n) + " files"
}

// printable replaces the control and format characters of s (escape sequences, newlines,
// bidirectional overrides) with '?', so a value read from the cluster prints as the text it is.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			return '?'
		}
		return r
	}, s)
}

// printRequests writes the pull request lines under the table, after a blank line; nothing when
// there are none.
func printRequests(w io.Writer, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\n%s\n", strings.Join(lines, "\n")); err != nil {
		return fmt.Errorf("write the pull requests: %w", err)
	}
	return nil
}

// adoptedLines say, for a destination that adopted its folder, what the mirror found there that
// needs a person: documents whose objects the cluster does not have (left in place), files it
// could not read, objects it did not write. Each entry is on a line of its own, printed without
// the control characters a file's name may carry.
func adoptedLines(d *crds.GitDestination) []string {
	a := d.Status.Adopted
	if !d.Adopted() || a == nil {
		return nil
	}
	var out []string
	add := func(what string, entries []string) {
		for _, e := range entries {
			out = append(out, what+": "+printable(e))
		}
	}
	add("absent from the cluster, left in "+d.Spec.BaseFolder+" (spec.existing.prune removes it)", a.Absent)
	add("problem in "+d.Spec.BaseFolder, a.Problems)
	add("not written", a.Unwritten)
	return out
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
