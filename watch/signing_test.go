package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitsecrets"
	"github.com/configbutler/gitops-reverser/testenv"
)

// getRepoConfig reads a GitRepoConfig of the test namespace.
func (e *env) getRepoConfig(name string) *crds.GitRepoConfig {
	e.t.Helper()
	u, err := e.dyn.Resource(crds.GitRepoConfigs).Namespace(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	obj, err := crds.FromUnstructured[crds.GitRepoConfig](u)
	if err != nil {
		e.t.Fatal(err)
	}
	return obj
}

// TestReportSigningKeyPatchesOnlyStatusSigningKey sets status.signingKey of a GitRepoConfig,
// changes it and removes it; the conditions beside it stay, and an unchanged key sends nothing.
func TestReportSigningKeyPatchesOnlyStatusSigningKey(t *testing.T) {
	e := newEnv(t)
	r := &reporter{dyn: e.dyn}
	ready := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Reachable","message":"ok","lastTransitionTime":"2026-01-02T03:04:05Z"}]}}`)
	if _, err := e.dyn.Resource(crds.GitRepoConfigs).Namespace(e.ns).Patch(e.ctx, "repo", types.MergePatchType, ready,
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	ssh := &gitops.SigningKey{Format: gitops.SigningSSH, PublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb9 one", Fingerprint: "SHA256:one"}
	pgp := &gitops.SigningKey{Format: gitops.SigningOpenPGP,
		PublicKey:   "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ\n-----END PGP PUBLIC KEY BLOCK-----\n",
		Fingerprint: "0123456789ABCDEF0123456789ABCDEF01234567"}
	for _, step := range []struct {
		name string
		key  *gitops.SigningKey
	}{{"set", ssh}, {"unchanged", ssh}, {"changed", pgp}, {"removed", nil}, {"still removed", nil}} {
		before := e.getRepoConfig("repo")
		if err := r.reportSigningKey(e.ctx, before, step.key); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := e.getRepoConfig("repo")
		var want *crds.SigningKeyStatus
		if step.key != nil {
			want = &crds.SigningKeyStatus{Format: step.key.Format, PublicKey: step.key.PublicKey, Fingerprint: step.key.Fingerprint}
		}
		if diff := cmp.Diff(want, after.Status.SigningKey); diff != "" {
			t.Errorf("%s: status.signingKey (-want +got):\n%s", step.name, diff)
		}
		if len(after.Status.Conditions) != 1 || after.Status.Conditions[0].Reason != "Reachable" {
			t.Errorf("%s: conditions = %+v, want the Ready condition untouched", step.name, after.Status.Conditions)
		}
		changed := after.ResourceVersion != before.ResourceVersion
		if wantChange := step.name != "unchanged" && step.name != "still removed"; changed != wantChange {
			t.Errorf("%s: the object changed = %t, want %t", step.name, changed, wantChange)
		}
	}
	// A GitRepoConfig deleted meanwhile is not an error.
	gone := e.getRepoConfig("repo")
	gone.Name = "deleted"
	if err := r.reportSigningKey(e.ctx, gone, ssh); err != nil {
		t.Errorf("patch of a deleted GitRepoConfig: %v", err)
	}
}

// signingPool stands in for the signing of gitsecrets and the pool, which do their own tests of
// it: it records the Signing each repository is declared with, hands the real reader of Secrets
// the repository without it, and reports a key made of the Secret's name, or SigningKeyInvalid
// for the Secret "broken".
type signingPool struct {
	Repositories
	mu   sync.Mutex
	seen map[string]*gitsecrets.Signing
}

func (p *signingPool) SetRepositories(ctx context.Context, repos []gitsecrets.Repository) map[string]gitsecrets.RepoState {
	p.mu.Lock()
	signed := map[string]*gitsecrets.Signing{}
	plain := make([]gitsecrets.Repository, 0, len(repos))
	for _, r := range repos {
		p.seen[r.Name] = r.Signing
		signed[r.Name] = r.Signing
		r.Signing = nil
		plain = append(plain, r)
	}
	p.mu.Unlock()
	states := p.Repositories.SetRepositories(ctx, plain)
	for name, s := range signed {
		st, ok := states[name]
		switch {
		case !ok || s == nil:
		case s.Secret.Name == "broken":
			st = gitsecrets.RepoState{Reason: "SigningKeyInvalid", Message: "Secret " + s.Secret.Namespace + "/broken: no usable key signingKey"}
		default:
			st.SigningKey = &gitops.SigningKey{Format: s.Format, PublicKey: "key-of-" + s.Secret.Name, Fingerprint: "SHA256:" + s.Secret.Name}
		}
		states[name] = st
	}
	return states
}

func (p *signingPool) signing(name string) (*gitsecrets.Signing, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.seen[name]
	return s, ok
}

// TestCommitSigningReachesThePoolAndStatus: spec.commitSigning is handed to the pool as the
// repository's Signing, the pool's key lands in status.signingKey, an unusable key makes the
// repository and its destinations not Ready, and removing commitSigning removes the key.
func TestCommitSigningReachesThePoolAndStatus(t *testing.T) {
	e := newEnv(t)
	pool := &signingPool{seen: map[string]*gitsecrets.Signing{}}
	e.wrapRepos = func(r Repositories) Repositories { pool.Repositories = r; return pool }
	// repo sets spec.commitSigning with a merge patch: the manager writes the status meanwhile.
	repo := func(signing *crds.CommitSigning) {
		t.Helper()
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"commitSigning": signing}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.dyn.Resource(crds.GitRepoConfigs).Namespace(e.ns).Patch(e.ctx, "repo", types.MergePatchType, body,
			metav1.PatchOptions{}); err != nil {
			t.Fatalf("set spec.commitSigning: %v", err)
		}
	}
	name := e.ns + "/repo"
	waitSigning := func(want *gitsecrets.Signing) {
		t.Helper()
		testenv.Eventually(t, time.Minute, "Signing handed to the pool", func() (bool, string) {
			got, ok := pool.signing(name)
			return ok && cmp.Equal(want, got), fmt.Sprintf("got %+v, want %+v", got, want)
		})
	}
	waitStatus := func(want *crds.SigningKeyStatus) {
		t.Helper()
		testenv.Eventually(t, time.Minute, "status.signingKey", func() (bool, string) {
			got := e.getRepoConfig("repo").Status.SigningKey
			return cmp.Equal(want, got), fmt.Sprintf("got %+v, want %+v", got, want)
		})
	}
	waitReady := func(gvr schema.GroupVersionResource, name string, status metav1.ConditionStatus, reason string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, gvr.Resource+" "+name+" Ready", func() (bool, string) {
			c := e.readyCondition(gvr, e.ns, name)
			if c == nil {
				return false, "no Ready condition"
			}
			return c.Status == status && c.Reason == reason, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		})
	}
	sshSigning := &gitsecrets.Signing{Format: gitops.SigningSSH, Secret: gitsecrets.SecretRef{Namespace: e.ns, Name: "signing"}}
	sshStatus := &crds.SigningKeyStatus{Format: crds.SigningSSH, PublicKey: "key-of-signing", Fingerprint: "SHA256:signing"}

	repo(&crds.CommitSigning{Format: crds.SigningSSH, SecretRef: crds.LocalReference{Name: "signing"}})
	e.startManager()
	waitSigning(sshSigning)
	waitStatus(sshStatus)
	waitReady(crds.GitRepoConfigs, "repo", metav1.ConditionTrue, "Reachable")

	repo(&crds.CommitSigning{Format: crds.SigningOpenPGP, SecretRef: crds.LocalReference{Name: "pgp"}})
	waitSigning(&gitsecrets.Signing{Format: gitops.SigningOpenPGP, Secret: gitsecrets.SecretRef{Namespace: e.ns, Name: "pgp"}})
	waitStatus(&crds.SigningKeyStatus{Format: crds.SigningOpenPGP, PublicKey: "key-of-pgp", Fingerprint: "SHA256:pgp"})

	repo(&crds.CommitSigning{Format: crds.SigningSSH, SecretRef: crds.LocalReference{Name: "broken"}})
	waitReady(crds.GitRepoConfigs, "repo", metav1.ConditionFalse, "SigningKeyInvalid")
	waitReady(crds.GitDestinations, "dest", metav1.ConditionFalse, "RepoNotReady")
	waitStatus(nil)

	repo(&crds.CommitSigning{Format: crds.SigningSSH, SecretRef: crds.LocalReference{Name: "signing"}})
	waitStatus(sshStatus)
	waitReady(crds.GitDestinations, "dest", metav1.ConditionTrue, "Ready")

	repo(nil)
	waitSigning(nil)
	waitStatus(nil)
	waitReady(crds.GitRepoConfigs, "repo", metav1.ConditionTrue, "Reachable")
	waitReady(crds.GitDestinations, "dest", metav1.ConditionTrue, "Ready")
}
