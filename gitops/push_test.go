package gitops

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestARemoteRefusingThinPacksGetsWholeOnes: a remote whose receive-pack refuses thin packs
// (git's own switch for it) without saying so beforehand fails the first push of a changed
// folder; the worker sends it again whole, and after a second such failure sends whole packs
// from then on.
func TestARemoteRefusingThinPacksGetsWholeOnes(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "thinless")
	w := StartWorker(t, url, "", BatchLimits{})
	for i := range 300 {
		MustEnqueue(t, w, Change{Path: cmPath(fmt.Sprint("cm-", i)), Content: configMap("cm", "0", 200)})
	}
	MustFlush(t, w)
	srv.SetRefusingThinPacks(true)
	for r := 1; r <= 3; r++ {
		MustEnqueue(t, w, Change{Path: cmPath(fmt.Sprint("cm-", r)), Content: configMap("cm", fmt.Sprint(r), 200)})
		MustFlush(t, w)
	}
	got, err := srv.ReadFile("thinless", "main", cmPath("cm-3"))
	if err != nil || !bytes.Equal(got, configMap("cm", "3", 200)) {
		t.Fatalf("the remote holds %q (%v)", got, err)
	}
	testenv.MustGit(t, "--git-dir="+filepath.Join(srv.Root, "thinless.git"), "fsck", "--strict", "--no-dangling", "--full")
}
