package daemon

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestCommitSigning: a GitRepoConfig asks for SSH-signed commits, but its Secret holds no usable
// key. The repository and its destination are not Ready with the reason, and nothing reaches the
// remote: no commit rather than an unsigned one. Once the Secret holds a key, the mirror pushes;
// the status shows the public key, and every commit verifies with git verify-commit against it.
// gitops_reverser_signing_keys_invalid is 1 while the key is broken, 0 once it is fixed.
func TestCommitSigning(t *testing.T) {
	cp := planes.Lend(t)
	const ns = "signing"
	ctx := context.Background()
	srv, kube := mirrorSetup(t, ns)
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "signing-key", Namespace: ns}, Data: map[string][]byte{"signingKey": []byte("not a key")}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, key, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := `{"spec":{"commitSigning":{"format":"ssh","secretRef":{"name":"signing-key"}}}}`
	if _, err := dyn.Resource(crds.GitRepoConfigs).Namespace(ns).Patch(ctx, "repo", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), "--git-committer-name", "Fleet Bot", "--git-committer-email", "fleet-bot@example.com")

	readyOf := func(gvr schema.GroupVersionResource, name string) *metav1.Condition {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		var st crds.Status
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"conditions": conds}, &st); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(st.Conditions, crds.ConditionReady)
	}
	testenv.Eventually(t, time.Minute, "the broken key reported", func() (bool, string) {
		repo, dest := readyOf(crds.GitRepoConfigs, "repo"), readyOf(crds.GitDestinations, "dest")
		ok := repo != nil && repo.Reason == "SigningKeyInvalid" && strings.Contains(repo.Message, "signingKey") &&
			dest != nil && dest.Status == metav1.ConditionFalse
		return ok, fmt.Sprintf("repo %+v, dest %+v", repo, dest)
	}, d.FailFast())
	if log, err := srv.Log("state", "main"); err == nil && len(log) > 0 {
		t.Fatalf("commits were pushed without a usable signing key: %+v", log)
	}
	if got := d.Metric(t, "gitops_reverser_signing_keys_invalid"); got != 1 {
		t.Errorf("signing_keys_invalid = %v with the broken key, want 1", got)
	}

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "gitops-reverser")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	public := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	key.Data["signingKey"] = pem.EncodeToMemory(block)
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, key, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the ConfigMap mirrored once the key is fixed",
		remoteHas(srv, layout.Path("live", "", "configmaps", ns, "app")), d.FailFast())
	if got := d.Metric(t, "gitops_reverser_signing_keys_invalid"); got != 0 {
		t.Errorf("signing_keys_invalid = %v once the key is fixed, want 0", got)
	}
	testenv.Eventually(t, time.Minute, "the public key in the status", func() (bool, string) {
		u, err := dyn.Resource(crds.GitRepoConfigs).Namespace(ns).Get(ctx, "repo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got, _, _ := unstructured.NestedString(u.Object, "status", "signingKey", "publicKey")
		fp, _, _ := unstructured.NestedString(u.Object, "status", "signingKey", "fingerprint")
		return got == public && fp == ssh.FingerprintSHA256(signer.PublicKey()), fmt.Sprintf("status.signingKey %q %q", got, fp)
	}, d.FailFast())

	log, err := srv.Log("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range log {
		if c.CommitterName != "Fleet Bot" || c.CommitterEmail != "fleet-bot@example.com" {
			t.Errorf("commit %s committed by %s <%s>, want the --git-committer identity", c.SHA, c.CommitterName, c.CommitterEmail)
		}
		if out, err := testenv.VerifySSHCommit(t, filepath.Join(srv.Root, "state.git"), c.SHA, public); err != nil {
			t.Errorf("commit %s does not verify: %v\n%s", c.SHA, err, out)
		}
	}
	if got := d.Metric(t, "gitops_reverser_commits_signed_total"); got < float64(len(log)) {
		t.Errorf("commits_signed_total = %v, want at least %d", got, len(log))
	}
}
