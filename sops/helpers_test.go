package sops

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/configbutler/gitops-reverser/testenv"
)

// secretYAML is a Secret as the mirror writes it (canonical YAML), with base64 data and stringData.
const secretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: db-credentials
  namespace: prod
  labels:
    app.kubernetes.io/name: db
  annotations:
    example.com/owner: team-a
type: Opaque
data:
  password: c3VwZXItc2VjcmV0LXBhc3N3b3Jk
  username: ZGItYWRtaW4tdXNlcg==
  tls.key: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUV2Z0lCQURBTkJna3Foa2lHOXcwQkFRRUZBQVNDQktnd2dnU2tBZ0VBQW9JQkFRQwotLS0tLUVORCBQUklWQVRFIEtFWS0tLS0tCg==
stringData:
  config.yaml: |
    endpoint: https://db.internal:5432
    apiToken: plain-config-token-value
  token: plain-string-token-value
`

// secretValues are the values of secretYAML that must never appear in an encrypted file, in
// plain form or base64.
var secretValues = []string{
	"c3VwZXItc2VjcmV0LXBhc3N3b3Jk", "ZGItYWRtaW4tdXNlcg==", "super-secret-password", "db-admin-user",
	"PRIVATE KEY", "plain-config-token-value", "plain-string-token-value",
}

// newIdentity returns a fresh age X25519 identity.
func newIdentity(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// runSops runs the pinned sops CLI in dir with a clean environment: HOME and the config folders
// are temporary, and the only age key it knows is identity (if any).
func runSops(t testing.TB, dir, identity string, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GNUPGHOME=" + filepath.Join(home, ".gnupg"),
	}
	if identity != "" {
		env = append(env, "SOPS_AGE_KEY="+identity)
	}
	cmd := exec.Command(testenv.SopsBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &sopsError{err: err, stderr: stderr.String()}
	}
	return stdout.Bytes(), nil
}

type sopsError struct {
	err    error
	stderr string
}

func (e *sopsError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }

// sopsDecrypt runs `sops -d` on doc written to a file.
func sopsDecrypt(t testing.TB, doc []byte, identity string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return runSops(t, dir, identity, "-d", "--input-type", "yaml", "--output-type", "yaml", "secret.yaml")
}

// parseYAML returns doc decoded as generic YAML.
func parseYAML(t testing.TB, doc []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if err := yaml.Unmarshal(doc, &out); err != nil {
		t.Fatalf("parse YAML: %v\n%s", err, doc)
	}
	return out
}

// sameYAML fails the test unless got and want have the same parsed content.
func sameYAML(t testing.TB, got, want []byte) {
	t.Helper()
	if diff := cmp.Diff(parseYAML(t, want), parseYAML(t, got)); diff != "" {
		t.Errorf("content differs (-want +got):\n%s", diff)
	}
}

// assertNoPlaintext fails the test if a secret value, or its base64, appears in doc.
func assertNoPlaintext(t testing.TB, doc []byte) {
	t.Helper()
	for _, v := range secretValues {
		for _, s := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if bytes.Contains(doc, []byte(s)) {
				t.Errorf("the encrypted document contains the plaintext %q", s)
			}
		}
	}
}
