package gitstore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestTheNextChangeReadsItsFileWherePushed: a file changed once has its new version located in
// the pack the clone kept of the push, and the locator reads it back byte for byte; a location
// that is wrong is refused by the object's name and the file read through go-git; a version
// superseded is forgotten. Over more pushes than the clone keeps packs (so packs are merged
// away under the locator), every change lands: the remote holds the last version of each file
// and git fsck --strict accepts it. A closed clone leaves no pack open.
func TestTheNextChangeReadsItsFileWherePushed(t *testing.T) {
	srv := mustGitServer(t)
	c := openClone(t, mustRepo(t, srv, "located"), filepath.Join(t.TempDir(), "clone"), 0)
	const files = 20
	name := func(i int) string { return fmt.Sprintf("cm-%02d", i) }
	content := func(i, round int) []byte { return configMap(name(i), fmt.Sprint(round), 400) }
	write := func(round int, which ...int) {
		changes := map[string][]byte{}
		for _, i := range which {
			changes[cmPath(name(i))] = content(i, round)
		}
		c.write(changes)
	}
	all := make([]int, files)
	for i := range all {
		all[i] = i
	}
	write(0, all...) // created: nothing reads these before their next change
	write(1, all...)
	// onStore runs check on the clone's store and fails the test with its error.
	onStore := func(check func(s *Store) error) {
		t.Helper()
		if err := check(c.Store()); err != nil {
			t.Fatal(err)
		}
	}
	onStore(func(s *Store) error {
		for i := range files {
			h := objectHash(plumbing.BlobObject, content(i, 1))
			if _, ok := s.located.at[h]; !ok {
				return fmt.Errorf("%s of round 1 is not located", name(i))
			}
			if got, ok := s.located.read(h); !ok || !bytes.Equal(got, content(i, 1)) {
				return fmt.Errorf("the locator reads %s as %q (%v)", name(i), got, ok)
			}
			if _, ok := s.located.at[objectHash(plumbing.BlobObject, content(i, 0))]; ok {
				return fmt.Errorf("%s of round 0, created and never read, is located", name(i))
			}
		}
		// Two locations that are wrong: another file's entry, and one byte into this one's.
		h, other := objectHash(plumbing.BlobObject, content(0, 1)), objectHash(plumbing.BlobObject, content(1, 1))
		for _, wrong := range []blobAt{s.located.at[other], {pack: s.located.at[h].pack, offset: s.located.at[h].offset + 1}} {
			s.located.at[h] = wrong
			if got, ok := s.located.read(h); ok {
				return fmt.Errorf("a wrong location (%+v) reads %q", wrong, got)
			}
			if got, err := s.Blob(h); err != nil || !bytes.Equal(got, content(0, 1)) {
				return fmt.Errorf("a blob no longer located reads %q (%v)", got, err)
			}
		}
		return nil
	})
	write(2, all...)
	onStore(func(s *Store) error {
		for i := range files {
			if _, ok := s.located.at[objectHash(plumbing.BlobObject, content(i, 1))]; ok {
				return fmt.Errorf("%s of round 1, superseded, is still located", name(i))
			}
		}
		return nil
	})
	for round := 3; round < 3+maxPacks+8; round++ { // one push each: the clone merges its packs
		write(round, round%files, (round+7)%files)
	}
	onStore(func(s *Store) error {
		if packs, err := s.sto.ObjectPacks(); err != nil || len(packs) > maxPacks {
			return fmt.Errorf("the clone has %d packs (%v): none were merged", len(packs), err)
		}
		return nil
	})
	last := map[int]int{}
	for i := range files {
		last[i] = 2
	}
	for round := 3; round < 3+maxPacks+8; round++ {
		last[round%files], last[(round+7)%files] = round, round
	}
	for i, round := range last {
		got, err := srv.ReadFile("located", "main", cmPath(name(i)))
		if err != nil || !bytes.Equal(got, content(i, round)) {
			t.Fatalf("the remote holds %s as %q (%v), want round %d", name(i), got, err, round)
		}
	}
	testenv.MustGit(t, "--git-dir="+filepath.Join(srv.Root, "located.git"), "fsck", "--strict", "--no-dangling", "--full")
	c.close()
	if n := len(c.located.files); n != 0 {
		t.Fatalf("a closed clone keeps %d packs open", n)
	}
}
