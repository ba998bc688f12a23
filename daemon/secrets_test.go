package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/sops"
	"github.com/configbutler/gitops-reverser/testenv"
)

// sopsDecrypt runs the real sops CLI on doc with identity as its only age key.
func sopsDecrypt(t testing.TB, doc []byte, identity *age.X25519Identity) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.SopsBinary(t), "-d", "--input-type", "yaml", "--output-type", "yaml", "secret.yaml")
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + t.TempDir(), "SOPS_AGE_KEY=" + identity.String()}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sops -d: %w: %s", err, stderr.String())
	}
	return out, nil
}

// decryptedData is the data of the Secret file at path, decrypted by the sops CLI.
func decryptedData(t testing.TB, srv *testenv.GitServer, path string, identity *age.X25519Identity) (map[string][]byte, error) {
	t.Helper()
	doc, err := srv.ReadFile("state", "main", path)
	if err != nil {
		return nil, err
	}
	plain, err := sopsDecrypt(t, doc, identity)
	if err != nil {
		return nil, err
	}
	var s corev1.Secret
	if err := yaml.Unmarshal(plain, &s); err != nil {
		return nil, err
	}
	return s.Data, nil
}

func newAgeIdentity(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// commitsTouching lists the commits of the remote that changed path, newest first, by author.
func commitsTouching(t testing.TB, srv *testenv.GitServer, path string) []string {
	t.Helper()
	history, err := srv.History("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	var authors []string
	for _, c := range history {
		if _, ok := c.Files[path]; ok {
			authors = append(authors, c.AuthorName)
		}
	}
	return authors
}

// TestSecretsAreMirroredEncryptedWithSOPS: without spec.encryption a Secret a rule names is not
// written at all. With it, the Secret is a SOPS document the real sops CLI decrypts to the live
// data, committed by its author, with a .sops.yaml beside; a restarted daemon with a fresh clone
// (a re-seed) makes no commit for the unchanged Secret; an update makes one commit credited to its
// author; a new recipient list re-encrypts it; and no blob in the remote's whole history holds a
// Secret value, raw or base64.
func TestSecretsAreMirroredEncryptedWithSOPS(t *testing.T) {
	cp := planes.Lend(t)
	ns := "sealed"
	srv, kube := mirrorSetup(t, ns)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.AdminConfig())
	grant(t, kube, ns, "alice")
	grantEdit(t, kube, ns, "secrets", "alice")
	// A rule that mirrors Secrets reads them as a ServiceAccount that may, and agreed to.
	writerAccount(t, kube, ns, "secrets-reader", "secrets", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}}})
	rule, err := crds.ToUnstructured(&crds.WatchRule{ObjectMeta: metav1.ObjectMeta{Name: "secrets", Namespace: ns},
		Spec: crds.WatchRuleSpec{DestinationRef: crds.NamespacedReference{Name: "dest"}, Rules: []crds.ResourceRule{{Resources: []string{"secrets"}}},
			ServiceAccountName: "secrets-reader"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crds.WatchRules).Namespace(ns).Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := userClient(cp.UserConfig("alice"))
	values := map[string][]byte{"password": []byte("hunter2-correct-horse"), "token": []byte("tok-9f8e7d6c5b4a")}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Data: values}
	if _, err := alice.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	file := "live/" + ns + "/secrets/db.yaml"
	marker := func(d *testenv.Daemon, name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, time.Minute, name+" in Git", remoteHas(srv, "live/"+ns+"/configmaps/"+name+".yaml"), d.FailFast())
	}

	d := startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)
	marker(d, "before-encryption")
	if files, _ := srv.Files("state", "main"); slices.ContainsFunc(files, func(f string) bool { return strings.Contains(f, "/secrets/") }) {
		t.Fatalf("a Secret was written without spec.encryption: %v", files)
	}

	first := newAgeIdentity(t)
	setEncryption(t, dyn, ns, `{"spec":{"encryption":{"provider":"sops","age":{"recipients":["`+first.Recipient().String()+`"]}}}}`)
	testenv.Eventually(t, time.Minute, "the Secret in Git", remoteHas(srv, file), d.FailFast())
	got, err := decryptedData(t, srv, file, first)
	if err != nil || !equalData(got, values) {
		t.Fatalf("sops -d gives %v (%v), want the live data", got, err)
	}
	if ok, _ := remoteHas(srv, "live/.sops.yaml")(); !ok {
		t.Error("no .sops.yaml at the base folder")
	}
	// Enabling encryption re-lists: the Secret is written by a sync, credited to the bot.
	if authors := commitsTouching(t, srv, file); len(authors) != 1 {
		t.Fatalf("commits of the Secret: %v, want one", authors)
	}

	// A restart with a fresh clone re-seeds: the unchanged Secret makes no commit.
	d.Stop(t)
	d = startAttributingDaemon(t, "")
	waitRegistered(t, d, kube, ns)
	marker(d, "after-restart")
	if authors := commitsTouching(t, srv, file); len(authors) != 1 {
		t.Fatalf("the unchanged Secret was committed again after a restart: commits by %v", authors)
	}

	// An update by alice: one commit, hers.
	values["password"] = []byte("rotated-battery-staple")
	patch := fmt.Appendf(nil, `{"data":{"password":%q}}`, base64.StdEncoding.EncodeToString(values["password"]))
	if _, err := alice.CoreV1().Secrets(ns).Patch(ctx, "db", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the update in Git, by alice", func() (bool, string) {
		authors := commitsTouching(t, srv, file)
		return slices.Equal(authors, []string{"alice", gitops.Bot.Name}), fmt.Sprint(authors)
	}, d.FailFast())
	if got, err := decryptedData(t, srv, file, first); err != nil || !equalData(got, values) {
		t.Fatalf("after the update sops -d gives %v (%v)", got, err)
	}

	// New recipients, from a Secret: the file is encrypted for them, and the old key reads nothing new.
	second := newAgeIdentity(t)
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sops-recipients", Namespace: ns},
		StringData: map[string]string{crds.RecipientsKey: "# the platform team\n" + second.Recipient().String() + "\n"}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, keys, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setEncryption(t, dyn, ns, `{"spec":{"encryption":{"age":{"recipients":null,"recipientsSecretRef":{"name":"sops-recipients"}}}}}`)
	testenv.Eventually(t, time.Minute, "the Secret re-encrypted for the new recipient", func() (bool, string) {
		doc, err := srv.ReadFile("state", "main", file)
		if err != nil {
			return false, err.Error()
		}
		r, err := sops.Recipients(doc)
		return err == nil && slices.Equal(r, []string{second.Recipient().String()}), fmt.Sprint(r, err)
	}, d.FailFast())
	if got, err := decryptedData(t, srv, file, second); err != nil || !equalData(got, values) {
		t.Fatalf("the new recipient's sops -d gives %v (%v)", got, err)
	}
	if _, err := decryptedData(t, srv, file, first); err == nil {
		t.Error("the removed recipient still decrypts the re-encrypted Secret")
	}

	// No Secret value anywhere in the history, raw or base64.
	history, err := srv.History("state", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range history {
		for path, blob := range c.Files {
			for _, v := range [][]byte{[]byte("hunter2-correct-horse"), []byte("tok-9f8e7d6c5b4a"), []byte("rotated-battery-staple")} {
				if bytes.Contains(blob, v) || bytes.Contains(blob, []byte(base64.StdEncoding.EncodeToString(v))) {
					t.Errorf("commit %s: %s holds a Secret value", c.SHA, path)
				}
			}
		}
	}
	if strings.Contains(d.Output(), "hunter2") || strings.Contains(d.Output(), "battery-staple") {
		t.Error("the daemon's log holds a Secret value")
	}
}

// setEncryption merge-patches the destination "dest" of ns.
func setEncryption(t testing.TB, dyn dynamic.Interface, ns, patch string) {
	t.Helper()
	if _, err := dyn.Resource(crds.GitDestinations).Namespace(ns).Patch(context.Background(), "dest", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
