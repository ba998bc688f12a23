package sops

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func testSealer(t testing.TB, key string, at *time.Time) *Sealer {
	t.Helper()
	s, err := NewSealer([]byte(strings.Repeat(key, MinKeyBytes)), func() time.Time { return *at })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSealKeepsAFileOfTheSamePlaintextAndRecipients: two seals of one Secret differ byte for byte
// (SOPS is randomised) but each recognises the other as the same Secret; a changed value, a
// changed recipient list, another digest key or a document re-encrypted by the sops CLI is not.
func TestSealKeepsAFileOfTheSamePlaintextAndRecipients(t *testing.T) {
	alice, bob := newIdentity(t), newIdentity(t)
	recipients := []string{alice.Recipient().String()}
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	s := testSealer(t, "k", &at)
	first, keepFirst, err := s.Seal([]byte(secretYAML), recipients)
	if err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Hour)
	second, keepSecond, err := s.Seal([]byte(secretYAML), recipients)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, second) {
		t.Fatal("two seals gave the same bytes: the test proves nothing")
	}
	if !keepSecond(first) || !keepFirst(second) {
		t.Fatal("a seal of the same Secret for the same recipients is not kept")
	}
	for _, v := range secretValues {
		if bytes.Contains(first, []byte(v)) {
			t.Errorf("the sealed document holds %q", v)
		}
	}

	changed := strings.Replace(secretYAML, "c3VwZXItc2VjcmV0LXBhc3N3b3Jk", "bmV3LXBhc3N3b3Jk", 1)
	if _, keep, _ := s.Seal([]byte(changed), recipients); keep(first) {
		t.Error("a changed value keeps the old file")
	}
	if _, keep, _ := s.Seal([]byte(secretYAML), append(recipients, bob.Recipient().String())); keep(first) {
		t.Error("a changed recipient list keeps the old file")
	}
	if _, keep, _ := testSealer(t, "x", &at).Seal([]byte(secretYAML), recipients); keep(first) {
		t.Error("another digest key keeps the file")
	}

	// sops -d gives the Secret back, with the digest annotation beside the Secret's own.
	plain, err := sopsDecrypt(t, first, alice.String())
	if err != nil {
		t.Fatalf("sops -d: %v", err)
	}
	got, want := parseYAML(t, plain), parseYAML(t, []byte(secretYAML))
	gotMeta := got["metadata"].(map[string]any)
	annotations := gotMeta["annotations"].(map[string]any)
	if annotations[DigestAnnotation] == nil || annotations["example.com/owner"] != "team-a" {
		t.Errorf("annotations after sops -d: %v", annotations)
	}
	delete(annotations, DigestAnnotation)
	for _, k := range []string{"data", "stringData", "metadata", "type", "kind"} {
		if !cmp.Equal(got[k], want[k]) {
			t.Errorf("%s after sops -d = %v, want %v", k, got[k], want[k])
		}
	}

	// Re-encrypted by someone with the sops CLI (same plaintext, digest annotation and all):
	// another lastmodified, so the mirror writes the live Secret again.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), plain, 0o600); err != nil {
		t.Fatal(err)
	}
	reencrypted, err := runSops(t, dir, "", "-e", "--age", recipients[0], "--encrypted-regex", EncryptedRegex, "secret.yaml")
	if err != nil {
		t.Fatalf("sops -e: %v", err)
	}
	if keepFirst(reencrypted) {
		t.Error("a document re-encrypted with the sops CLI is kept")
	}
	if keepFirst([]byte(secretYAML)) || keepFirst([]byte("not: [yaml")) {
		t.Error("a plaintext or broken file is kept")
	}
}

func TestNewSealerRefusesAShortKey(t *testing.T) {
	if _, err := NewSealer(make([]byte, MinKeyBytes-1), time.Now); err == nil {
		t.Fatal("a short digest key was accepted")
	}
}
