package gitstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/configbutler/gitops-reverser/testenv"
)

// testAuth is what the test Git servers accept.
var testAuth = &http.BasicAuth{Username: "user", Password: "pass"}

// mustGitServer starts a smart-HTTP Git server for the test.
func mustGitServer(tb testing.TB) *testenv.GitServer {
	tb.Helper()
	return testenv.MustGitServer(tb, testAuth.Username, testAuth.Password)
}

// mustRepo creates an empty repository and returns its URL.
func mustRepo(tb testing.TB, srv *testenv.GitServer, name string) string {
	tb.Helper()
	url, err := srv.CreateRepo(name)
	if err != nil {
		tb.Fatal(err)
	}
	return url
}

// testClone is a clone driven as the Git worker of package gitops drives one, without the
// worker: each write is one commit on the tip, pushed alone in a thin pack, and kept in the clone
// as the worker keeps what landed. A push the remote refuses fails the test.
type testClone struct {
	*Repo
	tb     testing.TB
	url    string
	closed bool
}

// openClone opens the clone in dir of the branch main of url, keeping keep commits (0:
// KeptCommits), and fetches it. The clone is closed when the test ends.
func openClone(tb testing.TB, url, dir string, keep int) *testClone {
	tb.Helper()
	c := openOffline(tb, url, dir, keep)
	c.fetch()
	return c
}

// openOffline opens the clone as openClone does, without fetching.
func openOffline(tb testing.TB, url, dir string, keep int) *testClone {
	tb.Helper()
	rp, err := Open(dir, Remote{URL: url, Branch: "main", Auth: testAuth}, cmp.Or(keep, KeptCommits), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	c := &testClone{Repo: rp, tb: tb, url: url}
	tb.Cleanup(c.close)
	return c
}

// close closes the clone, once.
func (c *testClone) close() {
	if !c.closed {
		c.Close()
		c.closed = true
	}
}

// fetch brings the clone up to date with the remote.
func (c *testClone) fetch() {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Fetch(ctx); err != nil {
		c.tb.Fatal(err)
	}
}

// renew renews the clone as its owner does: the renewed clone made beside it, swapped in, and
// fetched.
func (c *testClone) renew() {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Renewal()(ctx); err != nil {
		c.tb.Fatal(err)
	}
	if err := c.Swap(); err != nil {
		c.tb.Fatal(err)
	}
	c.fetch()
}

// write makes one commit of files (a nil content deletes the file) on the tip, pushes it and
// keeps it in the clone, and returns it.
func (c *testClone) write(files map[string][]byte) plumbing.Hash {
	c.tb.Helper()
	s := c.Store()
	tip, err := c.Tip()
	if err != nil {
		c.tb.Fatal(err)
	}
	root, err := s.CommitTree(tip)
	if err != nil {
		c.tb.Fatal(err)
	}
	ops := make([]Op, 0, len(files))
	for p, data := range files {
		o := Op{Path: p, Data: data}
		if data != nil {
			o.Blob = BlobHash(data)
		}
		ops = append(ops, o)
	}
	slices.SortFunc(ops, func(a, b Op) int { return strings.Compare(a.Path, b.Path) })
	tree, err := s.UpdateTree(root, ops)
	if err != nil {
		c.tb.Fatal(err)
	}
	commit := s.PutCommit(encodeTestCommit(tree, tip))
	pack, err := s.Pack(true)
	if err != nil {
		c.tb.Fatal(err)
	}
	mustPush(c.tb, c.url, tip, commit, pack.Bytes())
	err = c.KeepPushed(pack)
	s.DropOverlay()
	if err == nil {
		err = c.SetTip(commit)
	}
	if err == nil {
		err = c.Compact()
	}
	if err != nil {
		c.tb.Fatal(err)
	}
	return commit
}

// encodeTestCommit is a commit of tree on parent (zero: the first).
func encodeTestCommit(tree, parent plumbing.Hash) []byte {
	b := "tree " + tree.String() + "\n"
	if !parent.IsZero() {
		b += "parent " + parent.String() + "\n"
	}
	const ident = "test <test@example.com> 1700000000 +0000\n"
	return []byte(b + "author " + ident + "committer " + ident + "\nwrite\n")
}

// mustPush moves the branch main of the remote at url from old to tip through a receive-pack
// session, sending pack.
func mustPush(tb testing.TB, url string, old, tip plumbing.Hash, pack []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		tb.Fatal(err)
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		tb.Fatal(err)
	}
	sess, err := cl.NewReceivePackSession(ep, testAuth)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = sess.Close() }()
	caps := capability.NewList()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	switch {
	case err == nil:
		caps = ar.Capabilities
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		_ = caps.Set(capability.ReportStatus)
	default:
		tb.Fatal(err)
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(caps)
	req.Commands = []*packp.Command{{Name: plumbing.NewBranchReferenceName("main"), Old: old, New: tip}}
	req.Packfile = io.NopCloser(bytes.NewReader(pack))
	report, err := sess.ReceivePack(ctx, req)
	if err == nil {
		err = report.Error()
	}
	if err != nil {
		tb.Fatalf("push %s: %v", tip, err)
	}
}

// configMap renders a ConfigMap of about size bytes.
func configMap(name, value string, size int) []byte {
	head := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\ndata:\n  value: %q\n  pad: \"", name, value)
	pad := max(size-len(head)-2, 0)
	return []byte(head + strings.Repeat("x", pad) + "\"\n")
}

// cmPath is the file of ConfigMap name in namespace default.
func cmPath(name string) string { return "clusters/prod/default/configmaps/" + name + ".yaml" }
