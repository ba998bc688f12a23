package gitops

import (
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestASecretFromABaseIsNotWrittenIntoTheOverlay: a Secret production's overlay renders from a
// base is not the overlay's to rewrite (its document is the base's, which staging may share):
// its encrypted document is not added to the overlay beside the base's, which would make the
// overlay render the Secret twice and build no more; the change is not written, and says why.
func TestASecretFromABaseIsNotWrittenIntoTheOverlay(t *testing.T) {
	srv := MustGitServer(t)
	url := MustRepo(t, srv, "fleet")
	team := map[string]string{
		"apps/base/kustomization.yaml":       "resources:\n  - db-secret.yaml\n",
		"apps/base/db-secret.yaml":           "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: ENC[the base's ciphertext]\n",
		"apps/production/kustomization.yaml": "namespace: prod\nresources:\n  - ../base\n",
	}
	if _, err := srv.PushCommit("fleet", "main", testenv.Signature{Name: "Team", Email: "team@example.com"}, "the team's apps", team, nil); err != nil {
		t.Fatal(err)
	}
	w := StartWorker(t, url, "", BatchLimits{})
	key := placement.Key{Kind: "Secret", Namespace: "prod", Name: "db"}
	sealed := []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: prod\ndata:\n  password: ENC[the daemon's ciphertext]\n")
	MustEnqueue(t, w, Change{Path: "prod/secrets/db.yaml", Summary: "update db", Adopt: &Adoption{Folder: "apps/production",
		Overlay: "apps/production", Key: key, Whole: sealed}})
	MustFlush(t, w)
	if log := testenv.MustLog(t, srv, "fleet"); len(log) != 1 {
		files, _ := srv.Files("fleet", "main")
		t.Fatalf("%d commits, want the team's only; the repository holds %v", len(log), files)
	}
	why := w.Status().Adopted["apps/production"].Unwritten[key]
	if !strings.Contains(why, "apps/base/db-secret.yaml") {
		t.Errorf("unwritten %q, want the Secret's base file named", why)
	}
}
