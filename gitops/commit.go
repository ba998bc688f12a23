package gitops

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitstore"
)

// item is one pending intent, in arrival order: a change, a sync when sync is set, or the end of
// a hold of change.Path when release is set (change is then the restore, or holds only the path).
type item struct {
	change  Change
	sync    *Sync
	release *releaseMark
	at      time.Time // when it was put in the inbox; zero once coalesced
}

// run is a contiguous run of items by one author with the same trailers; it becomes at most
// one commit.
type run struct {
	author   Signature
	trailers [][2]string // after the identity's
	items    []item
	bytes    int64   // of the items' content, for pendingSize
	merged   *merged // on a run coalesce returned: what it merged, for the next coalesce
}

// buildStats counts what built commits change, reported once the remote accepts them.
type buildStats struct {
	commits, signed, written, deleted int
	bytes                             int64
}

// maxBodyLines bounds the list of changes in a commit message body.
const maxBodyLines = 50

// commitRun turns a run into one commit on parent and returns the new tip, or parent itself
// when nothing in the run changes the tree.
func (w *Worker) commitRun(parent plumbing.Hash, r run, stats *buildStats) (plumbing.Hash, error) {
	tree, err := w.store.CommitTree(parent)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	ro, err := w.resolveOps(tree, r)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	author, trailers := r.author, r.trailers
	if len(r.items) == 1 && r.items[0].release != nil && r.items[0].release.out != nil {
		c := r.items[0].release.out // a release alone credits what it commits
		author, trailers = c.credited(w.identity.Bot), c.Trailers
	}
	newTree, err := w.store.UpdateTree(tree, ro.ops)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("update tree: %w", err)
	}
	var s buildStats
	for i := range ro.ops {
		switch ro.ops[i].Effect {
		case gitstore.Written:
			s.written++
			s.bytes += int64(len(ro.ops[i].Data))
		case gitstore.Deleted:
			s.deleted++
		}
	}
	if s.written+s.deleted == 0 {
		return parent, nil
	}
	msg := w.message(&ro, s.written+s.deleted, trailers)
	data := encodeCommit(commitFields{tree: newTree, parent: parent, author: author, committer: w.identity.Committer, at: time.Now()}, msg)
	if w.signer != nil {
		// A commit that cannot be signed is not made: pushing it unsigned would pass a check the
		// user asked for. The push fails and is retried.
		if data, err = signCommit(data, w.signer); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("sign commit: %w", err)
		}
		stats.signed++
	}
	h := w.store.PutCommit(data)
	stats.commits++
	stats.written += s.written
	stats.deleted += s.deleted
	stats.bytes += s.bytes
	return h, nil
}

// runOps is what a run does to the tree: one op per path, sorted by path, and what the commit
// message says of each.
type runOps struct {
	ops       []gitstore.Op
	summaries []string       // in the order their paths first came
	at        map[string]int // path → its summary
}

// summary is what the commit message says of o.
func (r *runOps) summary(o *gitstore.Op) string { return r.summaries[r.at[o.Path]] }

// resolveOps turns a run's items into one op per path (the last intent wins), sorted by path.
// A sync deletes every *.yaml file under its scopes that is not live, as the tree stands at
// that point of the run. The writes and deletes of a held path are remembered by its hold
// instead, until the hold's release marker, which commits the latest of them (or the restore).
func (w *Worker) resolveOps(tree plumbing.Hash, r run) (runOps, error) {
	holds := w.holds
	if !holds.active() {
		holds = nil // the common case: one atomic load per run
	}
	at := make(map[string]int, len(r.items))
	ops := make([]gitstore.Op, 0, len(r.items))
	summaries := make([]string, 0, len(r.items))
	set := func(o gitstore.Op, summary string) {
		if i, ok := at[o.Path]; ok {
			ops[i], summaries[i] = o, summary
			return
		}
		at[o.Path] = len(ops)
		ops, summaries = append(ops, o), append(summaries, summary)
	}
	w.runs++
	fs := files{w: w, tree: tree, run: w.runs, ops: func(p string) (*gitstore.Op, bool) {
		if i, ok := at[p]; ok {
			return &ops[i], true
		}
		return nil, false
	}, each: func(fn func(string, []byte)) {
		for i := range ops {
			fn(ops[i].Path, ops[i].Data)
		}
	}}
	var checks []renderCheck
	for i := range r.items {
		it := &r.items[i]
		switch {
		case it.release != nil:
			if c := w.holds.release(it); c != nil {
				set(changeOp(*c))
			}
			continue
		case it.sync == nil && it.change.Adopt != nil:
			changes, checked, err := w.adopt(fs, &it.change)
			if w.adoptionFailed(err) {
				return runOps{}, err
			} else if err == nil {
				w.adoptedWritten(it.change.Adopt)
			}
			if a := it.change.Adopt; err == nil && len(changes) > 0 && len(a.Ops) > 0 && !checked {
				checks = append(checks, renderCheck{adoption: a, path: changes[0].Path})
			}
			for _, c := range changes {
				if holds == nil || !holds.remember(&c) {
					set(changeOp(c))
				}
			}
			continue
		case it.sync == nil:
			if holds == nil || !holds.remember(&it.change) {
				set(changeOp(it.change))
			}
			continue
		case it.sync.Adopted != nil:
			changes, err := w.absent(fs, it.sync.Adopted)
			if err != nil {
				return runOps{}, err
			}
			for _, c := range changes {
				if holds == nil || !holds.remember(&c) {
					set(changeOp(c))
				}
			}
			continue
		}
		orphans, err := w.orphans(tree, it.sync)
		if err != nil {
			return runOps{}, err
		}
		for _, p := range orphans {
			summary := "delete orphan " + p
			if holds == nil || !holds.remember(&Change{Path: p, Summary: summary}) {
				set(gitstore.Op{Path: p}, summary)
			}
		}
		for i := range ops { // before the sort below, ops[i]'s summary is summaries[i]
			if !ops[i].Blob.IsZero() && orphaned(ops[i].Path, it.sync) {
				ops[i], summaries[i] = gitstore.Op{Path: ops[i].Path}, "delete orphan "+ops[i].Path
			}
		}
		if holds != nil {
			holds.orphanRemembered(it.sync)
		}
	}
	if len(checks) > 0 && w.unrenderable == nil {
		if refused := w.unrendered(fs, checks); len(refused) > 0 { // the run again, without them
			w.unrenderable = refused
			defer func() { w.unrenderable = nil }()
			return w.resolveOps(tree, r)
		}
	}
	slices.SortFunc(ops, func(a, b gitstore.Op) int { return strings.Compare(a.Path, b.Path) })
	w.publishAdopted()
	return runOps{ops: ops, summaries: summaries, at: at}, nil
}

// changeOp is the op of a change, and what the commit message says of it.
func changeOp(c Change) (gitstore.Op, string) {
	o, summary := gitstore.Op{Path: c.Path, Keep: c.Keep}, c.Summary
	if c.Content != nil {
		o.Data = c.Content
		o.Blob = gitstore.BlobHash(c.Content)
	}
	if summary == "" {
		verb := "write "
		if c.Content == nil {
			verb = "delete "
		}
		summary = verb + c.Path
	}
	return o, summary
}

// orphans lists the *.yaml files of tree under the sync's scopes that are not live. Only the
// scopes' subtrees are read.
func (w *Worker) orphans(tree plumbing.Hash, s *Sync) ([]string, error) {
	var out []string
	var scopes []string
	for _, scope := range s.Scopes {
		expanded, err := w.expandScope(tree, scope)
		if err != nil {
			return nil, err
		}
		scopes = append(scopes, expanded...)
	}
	for _, scope := range scopes {
		entries, err := w.store.Dir(tree, strings.TrimSuffix(scope, "/"))
		if err != nil {
			return nil, fmt.Errorf("read scope %q: %w", scope, err)
		}
		err = w.store.WalkFiles(entries, []byte(scope), func(p []byte) {
			if _, live := s.Live[string(p)]; !live && strings.HasSuffix(string(p), ".yaml") {
				out = append(out, string(p))
			}
		})
		if err != nil {
			return nil, fmt.Errorf("walk scope %q: %w", scope, err)
		}
	}
	return out, nil
}

// expandScope resolves a scope with a "*" segment (any one folder, e.g. every namespace folder
// in "base/*/configmaps/") into the plain scopes of the folders that exist in tree.
func (w *Worker) expandScope(tree plumbing.Hash, scope string) ([]string, error) {
	prefix, suffix, wild := cutWildcard(scope)
	if !wild {
		return []string{scope}, nil
	}
	entries, err := w.store.Dir(tree, strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return nil, fmt.Errorf("read scope %q: %w", scope, err)
	}
	var out []string
	for i := range entries {
		if entries[i].IsDir() {
			out = append(out, prefix+entries[i].Name+"/"+suffix)
		}
	}
	return out, nil
}

// cutWildcard splits a scope around its "*" segment, if it has one.
func cutWildcard(scope string) (prefix, suffix string, found bool) {
	if rest, ok := strings.CutPrefix(scope, "*/"); ok {
		return "", rest, true
	}
	i := strings.Index(scope, "/*/")
	if i < 0 {
		return scope, "", false
	}
	return scope[:i+1], scope[i+3:], true
}

// underScope reports whether path lies under scope, where a "*" segment matches any one folder.
func underScope(path, scope string) bool {
	prefix, suffix, wild := cutWildcard(scope)
	if !wild {
		return strings.HasPrefix(path, scope)
	}
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, "/")
	return ok && strings.HasPrefix(rest, suffix)
}

// orphaned reports whether path is a *.yaml file under one of the sync's scopes and not live.
func orphaned(path string, s *Sync) bool {
	if !strings.HasSuffix(path, ".yaml") {
		return false
	}
	if _, live := s.Live[path]; live {
		return false
	}
	for _, scope := range s.Scopes {
		if underScope(path, scope) {
			return true
		}
	}
	return false
}

// message is the commit message: a subject, the list of changes, then the identity's trailers
// and the run's.
func (w *Worker) message(r *runOps, n int, trailers [][2]string) string {
	var b strings.Builder
	lines := 0
	for i := range r.ops {
		if r.ops[i].Effect == gitstore.Unchanged {
			continue
		}
		if lines == 0 {
			b.WriteString(oneLine(r.summary(&r.ops[i])))
			if n > 1 {
				fmt.Fprintf(&b, " (+%d more)\n", n-1)
			}
			b.WriteString("\n")
		}
		if n > 1 && lines < maxBodyLines {
			b.WriteString("- " + oneLine(r.summary(&r.ops[i])) + "\n")
		}
		lines++
	}
	if n > maxBodyLines {
		fmt.Fprintf(&b, "- … and %d more\n", n-maxBodyLines)
	}
	if len(w.identity.Trailers)+len(trailers) > 0 {
		b.WriteString("\n")
		for _, list := range [2][][2]string{w.identity.Trailers, trailers} {
			for _, t := range list {
				b.WriteString(oneLine(t[0]) + ": " + oneLine(t[1]) + "\n")
			}
		}
	}
	return b.String()
}

// commitFields are what a commit object says besides its message.
type commitFields struct {
	tree, parent      plumbing.Hash // parent zero: the first commit
	author, committer Signature
	at                time.Time
	authored          time.Time // the author's time; zero: at
}

// encodeCommit writes a commit object in Git's canonical form.
func encodeCommit(c commitFields, msg string) []byte {
	tree, parent, author, committer, now := c.tree, c.parent, c.author, c.committer, c.at
	b := make([]byte, 0, 256+len(msg))
	b = append(b, "tree "+tree.String()+"\n"...)
	if !parent.IsZero() {
		b = append(b, "parent "+parent.String()+"\n"...)
	}
	authored := c.authored
	if authored.IsZero() {
		authored = now
	}
	b = appendSignature(append(b, "author "...), author, authored)
	b = appendSignature(append(b, "committer "...), committer, now)
	b = append(b, '\n')
	return append(b, msg...)
}

// appendSignature writes the ident of s, cleaned: whatever it is handed, the line is one Git
// reads back as the same name and email.
func appendSignature(b []byte, s Signature, t time.Time) []byte {
	s = s.Clean()
	b = append(b, s.Name+" <"+s.Email+"> "...)
	b = strconv.AppendInt(b, t.Unix(), 10)
	return append(b, " "+t.Format("-0700")+"\n"...)
}

func oneLine(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\n", " ", "\r", " ").Replace(s))
}
