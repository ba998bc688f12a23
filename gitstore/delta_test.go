package gitstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/packfile"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestTreeDeltaMakesTheNextTree: the delta of a tree against its previous version, applied by
// go-git's own patcher, gives the next tree's encoding byte for byte, whatever the commit did to
// the entries: files written, added, deleted, a directory added or gone, runs of each at the
// start and the end.
func TestTreeDeltaMakesTheNextTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	entry := func(i int, dir bool) TreeEntry {
		e := TreeEntry{Name: fmt.Sprintf("object-%05d.yaml", i), Mode: fileMode}
		if dir {
			e.Name, e.Mode = fmt.Sprintf("object-%05d", i), dirMode
		}
		for k := range e.Hash {
			e.Hash[k] = byte(rng.Uint32())
		}
		return e
	}
	var prev []TreeEntry
	for i := range 2000 {
		prev = append(prev, entry(2*i, i%100 == 0))
	}
	cases := map[string]func([]TreeEntry) []TreeEntry{
		"one file written": func(es []TreeEntry) []TreeEntry { es[700].Hash[0]++; return es },
		"fifty written":    func(es []TreeEntry) []TreeEntry { each(es, 40, func(e *TreeEntry) { e.Hash[3]++ }); return es },
		"first and last written": func(es []TreeEntry) []TreeEntry {
			es[0].Hash[0]++
			es[len(es)-1].Hash[0]++
			return es
		},
		"added between": func(es []TreeEntry) []TreeEntry {
			out := append([]TreeEntry{}, es[:300]...)
			out = append(out, entry(601, false), entry(603, true))
			return append(out, es[300:]...)
		},
		"added at both ends": func(es []TreeEntry) []TreeEntry {
			first := TreeEntry{Name: "a.yaml", Mode: fileMode, Hash: es[0].Hash}
			return append(append([]TreeEntry{first}, es...), TreeEntry{Name: "z.yaml", Mode: fileMode})
		},
		"deleted": func(es []TreeEntry) []TreeEntry {
			return append(append([]TreeEntry{}, es[1:500]...), es[501:len(es)-1]...)
		},
		"a directory became a file of the same name": func(es []TreeEntry) []TreeEntry {
			es[100].Mode = fileMode
			return es
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			next := change(append([]TreeEntry{}, prev...))
			was, now := encodeTree(prev), encodeTree(next)
			delta := treeDelta(prev, next, len(now))
			if delta == nil {
				t.Fatal("no delta")
			}
			got, err := packfile.PatchDelta(was, delta)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, now) {
				t.Fatal("the delta does not make the next tree")
			}
			if len(delta) > len(now)/10 {
				t.Fatalf("delta of %d bytes for a tree of %d", len(delta), len(now))
			}
		})
	}
	t.Run("a small tree or a rewritten one gets none", func(t *testing.T) {
		small := prev[:5]
		if d := treeDelta(small, small, len(encodeTree(small))); d != nil {
			t.Fatalf("a delta of %d bytes for a small tree", len(d))
		}
		var other []TreeEntry
		for i := range 2000 {
			other = append(other, entry(2*i+1, false))
		}
		if d := treeDelta(prev, other, len(encodeTree(other))); d != nil {
			t.Fatalf("a delta of %d bytes for a tree that shares nothing", len(d))
		}
	})
}

func each(es []TreeEntry, step int, fn func(*TreeEntry)) {
	for i := 0; i < len(es); i += step {
		fn(&es[i])
	}
}

// TestChurnCostsWhatChanged: a folder of 2,000 files, then rounds of 50 written, as the issue
// measured. The folder's tree and the files go to the remote as deltas (a thin pack) and the
// clone keeps the tree as one, so each commit costs the clone and the wire at most twice what
// git gc needs for the same history. git fsck --strict accepts the remote and the clone, a plain git clone of the remote
// reads the last version of every file, and so does the clone opened again alone.
func TestChurnCostsWhatChanged(t *testing.T) {
	srv := mustGitServer(t)
	url := mustRepo(t, srv, "churn")
	clone := filepath.Join(t.TempDir(), "clone")
	remote := filepath.Join(srv.Root, "churn.git")
	c := openClone(t, url, clone, 0)
	const files, rounds, perRound = 2000, 30, 50
	name := func(i int) string { return fmt.Sprintf("cm-%04d", i) }
	seed := map[string][]byte{}
	for i := range files {
		seed[cmPath(name(i))] = configMap(name(i), "0", 300)
	}
	c.write(seed)
	commits := len(testenv.MustLog(t, srv, "churn"))
	cloneBefore, pushedBefore, gcBefore := testenv.DirSize(t, clone), srv.PushedBytes(), testenv.GCSize(t, remote)
	for r := 1; r <= rounds; r++ {
		changes := map[string][]byte{}
		for k := range perRound {
			i := (r*perRound + k*37) % files
			changes[cmPath(name(i))] = configMap(name(i), fmt.Sprint(r), 300)
		}
		c.write(changes)
	}
	if n := len(testenv.MustLog(t, srv, "churn")) - commits; n != rounds {
		t.Fatalf("%d commits, want %d", n, rounds)
	}
	grew, pushed, gc := testenv.DirSize(t, clone)-cloneBefore, srv.PushedBytes()-pushedBefore, testenv.GCSize(t, remote)-gcBefore
	t.Logf("per commit: clone %d B, pushed %d B, git gc %d B", grew/rounds, pushed/rounds, gc/rounds)
	if grew > 2*gc || pushed > 2*gc {
		t.Fatalf("the clone grew %d bytes and %d were pushed for what git gc stores in %d", grew, pushed, gc)
	}
	if !clonePacksHaveDeltas(t, clone) {
		t.Fatal("the clone holds no delta")
	}
	c.close()
	mustVerifyClone(t, clone)
	testenv.MustGit(t, "--git-dir="+remote, "fsck", "--strict", "--no-dangling", "--full")
	plain := filepath.Join(t.TempDir(), "plain")
	testenv.MustGit(t, "clone", "--quiet", srv.AuthURL("churn"), plain)
	want := map[string][]byte{}
	for i := range files {
		f := cmPath(name(i))
		got, err := os.ReadFile(filepath.Join(plain, f))
		if err != nil {
			t.Fatalf("a plain clone of the remote: %v", err)
		}
		want[f] = got
	}
	if last := cmPath(name((rounds * perRound) % files)); !bytes.Equal(want[last], configMap(name((rounds*perRound)%files), fmt.Sprint(rounds), 300)) {
		t.Fatalf("a plain clone reads %s as %q", last, want[last])
	}
	mustReadFilesOffline(t, srv, "churn", url, clone, want)
}

// TestBlobDeltaMakesTheNextFile: the delta of a file against its previous version, applied by
// go-git's patcher, gives the new file byte for byte: one value changed at the start, in the
// middle or at the end, the file grown or shrunk, a change longer than one insert instruction,
// a base larger than one copy instruction, and changes far apart. A file rewritten whole gets
// none.
func TestBlobDeltaMakesTheNextFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	text := func(n int) []byte { // lines of 30 bytes, as YAML's
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
			if i%30 == 29 {
				b[i] = '\n'
			}
		}
		return b
	}
	base := text(1200)
	splice := func(b []byte, at, cut int, with string) []byte {
		return append(append(append([]byte{}, b[:at]...), with...), b[at+cut:]...)
	}
	// Two lines changed, 750 bytes apart: what lies between is copied line by line.
	far := splice(splice(base, 150, 29, string(text(29))), 900, 29, string(text(29)))
	big := text(maxCopy + 4096)
	cases := map[string]struct {
		old, now []byte
		within   int // the most bytes the delta may take
	}{
		"one value at the start":  {base, splice(base, 0, 3, "xyz"), 24},
		"one value in the middle": {base, splice(base, 600, 5, "hello"), 24},
		"one value at the end":    {base, splice(base, len(base)-4, 4, "tail"), 24},
		"grown":                   {base, splice(base, 300, 0, "added: line\n"), 32},
		"shrunk":                  {base, splice(base, 300, 40, ""), 24},
		"a change of 250 bytes":   {base, splice(base, 500, 10, string(text(250))), 280},
		"the same":                {base, base, 24},
		"a base of two copies":    {big, splice(big, len(big)/2, 1, "!"), 40},
		"changes far apart":       {base, far, 120},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			delta := blobDelta(c.old, c.now)
			if delta == nil {
				t.Fatal("no delta")
			}
			got, err := packfile.PatchDelta(c.old, delta)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.now) {
				t.Fatal("the delta does not make the new file")
			}
			if len(delta) > c.within {
				t.Fatalf("delta of %d bytes, want at most %d", len(delta), c.within)
			}
		})
	}
	if d := blobDelta(base, text(1200)); d != nil {
		t.Fatalf("a delta of %d bytes for a file rewritten whole", len(d))
	}
}
