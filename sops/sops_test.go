package sops

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestEncryptDecryptsWithSopsCLI(t *testing.T) {
	a, b := newIdentity(t), newIdentity(t)
	enc, err := Encrypt([]byte(secretYAML), []string{b.Recipient().String(), a.Recipient().String()}, now)
	if err != nil {
		t.Fatal(err)
	}
	assertNoPlaintext(t, enc)
	doc := parseYAML(t, enc)
	md, _ := doc["metadata"].(map[string]any)
	if md["name"] != "db-credentials" || md["namespace"] != "prod" {
		t.Errorf("metadata is not readable in the encrypted file:\n%s", enc)
	}
	if doc["type"] != "Opaque" || doc["kind"] != "Secret" {
		t.Errorf("type/kind are not readable in the encrypted file:\n%s", enc)
	}
	if data, _ := doc["data"].(map[string]any); !strings.HasPrefix(data["password"].(string), "ENC[AES256_GCM,data:") ||
		!strings.HasSuffix(data["password"].(string), ",type:str]") {
		t.Errorf("data.password is not encrypted: %v", data["password"])
	}
	if !IsEncrypted(enc) {
		t.Error("IsEncrypted(Encrypt(...)) = false")
	}
	if IsEncrypted([]byte(secretYAML)) {
		t.Error("IsEncrypted(plain Secret) = true")
	}
	assertRecipients(t, enc, a, b)
	// The key order of the document is kept, with sops last.
	keys := regexp.MustCompile(`(?m)^(\w+):`).FindAllStringSubmatch(string(enc), -1)
	var top []string
	for _, k := range keys {
		top = append(top, k[1])
	}
	if want := []string{"apiVersion", "kind", "metadata", "type", "data", "stringData", "sops"}; !slices.Equal(top, want) {
		t.Errorf("top-level keys = %v, want %v", top, want)
	}

	for name, id := range map[string]string{"first": a.String(), "second": b.String()} {
		t.Run(name+" identity alone", func(t *testing.T) {
			plain, err := sopsDecrypt(t, enc, id)
			if err != nil {
				t.Fatalf("sops -d: %v\n%s", err, enc)
			}
			sameYAML(t, plain, []byte(secretYAML))
			ours, err := Decrypt(enc, []string{id})
			if err != nil {
				t.Fatal(err)
			}
			sameYAML(t, ours, []byte(secretYAML))
		})
	}
}

// TestEncryptTypedValues covers ints, floats, bools, empty strings, nulls, lists and nesting the
// way sops types them, and that unencrypted values are part of the MAC (sops -d checks it).
func TestEncryptTypedValues(t *testing.T) {
	const doc = `kind: Thing
count: 3
enabled: true
data:
  int: 42
  negative: -7
  float: 1.5
  yes: true
  no: false
  empty: ""
  nothing: null
  quoted: "0123"
  list: [a, 2, false]
  nested:
    deeper: value
    data: again
metadata:
  data: named-data-deep-down
  other: readable
`
	id := newIdentity(t)
	enc, err := Encrypt([]byte(doc), []string{id.Recipient().String()}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"type:int]", "type:float]", "type:bool]", "type:str]"} {
		if !bytes.Contains(enc, []byte(typ)) {
			t.Errorf("no value of %s in:\n%s", typ, enc)
		}
	}
	if bytes.Contains(enc, []byte("named-data-deep-down")) {
		t.Error("a value under a nested key named data is not encrypted (sops encrypts it)")
	}
	if !bytes.Contains(enc, []byte("other: readable")) {
		t.Errorf("metadata.other is not readable:\n%s", enc)
	}
	plain, err := sopsDecrypt(t, enc, id.String())
	if err != nil {
		t.Fatalf("sops -d: %v\n%s", err, enc)
	}
	sameYAML(t, plain, []byte(doc))
	ours, err := Decrypt(enc, []string{id.String()})
	if err != nil {
		t.Fatal(err)
	}
	sameYAML(t, ours, []byte(doc))
}

func TestDecryptSopsCLIOutput(t *testing.T) {
	for _, extra := range [][]string{nil, {"--mac-only-encrypted"}} {
		t.Run("flags "+strings.Join(extra, " "), func(t *testing.T) {
			id := newIdentity(t)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), []byte(secretYAML), 0o600); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"-e", "--age", id.Recipient().String(), "--encrypted-regex", EncryptedRegex,
				"--input-type", "yaml", "--output-type", "yaml"}, extra...)
			enc, err := runSops(t, dir, "", append(args, "secret.yaml")...)
			if err != nil {
				t.Fatalf("sops -e: %v", err)
			}
			assertNoPlaintext(t, enc)
			if !IsEncrypted(enc) {
				t.Fatalf("IsEncrypted = false for:\n%s", enc)
			}
			got, err := Recipients(enc)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{id.Recipient().String()}; !slices.Equal(got, want) {
				t.Errorf("Recipients = %v, want %v", got, want)
			}
			plain, err := Decrypt(enc, []string{id.String()})
			if err != nil {
				t.Fatalf("Decrypt: %v\n%s", err, enc)
			}
			sameYAML(t, plain, []byte(secretYAML))
		})
	}
}

func TestTamperingFails(t *testing.T) {
	id := newIdentity(t)
	enc, err := Encrypt([]byte(secretYAML), []string{id.Recipient().String()}, now)
	if err != nil {
		t.Fatal(err)
	}
	mac := regexp.MustCompile(`mac: ENC\[AES256_GCM,data:([^,]+),`).FindSubmatch(enc)
	if mac == nil {
		t.Fatalf("no mac in:\n%s", enc)
	}
	value := regexp.MustCompile(`password: ENC\[AES256_GCM,data:([^,]+),`).FindSubmatch(enc)
	if value == nil {
		t.Fatalf("no encrypted password in:\n%s", enc)
	}
	// Swapping two encrypted values keeps each authentic but breaks the AD or the MAC.
	user := regexp.MustCompile(`username: (ENC\[[^\]]+\])`).FindSubmatch(enc)
	pass := regexp.MustCompile(`password: (ENC\[[^\]]+\])`).FindSubmatch(enc)
	cases := map[string][]byte{
		"encrypted value": bytes.Replace(enc, value[1], flip(value[1]), 1),
		"mac":             bytes.Replace(enc, mac[1], flip(mac[1]), 1),
		"readable value":  bytes.Replace(enc, []byte("namespace: prod"), []byte("namespace: prud"), 1),
		"swapped values":  bytes.Replace(bytes.Replace(enc, user[1], []byte("SWAP"), 1), pass[1], user[1], 1),
		"lastmodified":    regexp.MustCompile(`lastmodified: "[^"]+"`).ReplaceAll(enc, []byte(`lastmodified: "2020-01-01T00:00:00Z"`)),
	}
	cases["swapped values"] = bytes.Replace(cases["swapped values"], []byte("SWAP"), pass[1], 1)
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			if bytes.Equal(bad, enc) {
				t.Fatal("the tampering changed nothing")
			}
			if _, err := Decrypt(bad, []string{id.String()}); err == nil {
				t.Error("Decrypt accepted a tampered document")
			} else {
				t.Logf("Decrypt: %v", err)
				assertNoPlaintext(t, []byte(err.Error()))
			}
			if _, err := sopsDecrypt(t, bad, id.String()); err == nil {
				t.Error("sops -d accepted a tampered document")
			}
		})
	}
}

// flip changes the first base64 character of b.
func flip(b []byte) []byte {
	out := bytes.Clone(b)
	if out[0] == 'A' {
		out[0] = 'B'
	} else {
		out[0] = 'A'
	}
	return out
}

func TestWrongIdentityFails(t *testing.T) {
	right, wrong := newIdentity(t), newIdentity(t)
	enc, err := Encrypt([]byte(secretYAML), []string{right.Recipient().String()}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decrypt(enc, []string{wrong.String()})
	if err == nil {
		t.Fatal("Decrypt with a wrong identity succeeded")
	}
	if !strings.Contains(err.Error(), "no identity opens the data key") {
		t.Errorf("error does not say the identity is wrong: %v", err)
	}
	if _, err := Decrypt(enc, []string{"AGE-SECRET-KEY-1NOTAKEY"}); err == nil {
		t.Error("Decrypt with a malformed identity succeeded")
	} else if strings.Contains(err.Error(), "NOTAKEY") {
		t.Errorf("the error repeats the identity: %v", err)
	}
	if _, err := sopsDecrypt(t, enc, wrong.String()); err == nil {
		t.Error("sops -d with a wrong identity succeeded")
	}
}

func TestCheckRecipient(t *testing.T) {
	if err := CheckRecipient(newIdentity(t).Recipient().String()); err != nil {
		t.Errorf("a generated recipient: %v", err)
	}
	for s, want := range map[string]string{
		"age1short": "invalid age recipient",
		"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host": "SSH public keys are not supported",
		"":                 "empty age recipient",
		"AGE-SECRET-KEY-1": "does not start with age1",
	} {
		err := CheckRecipient(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckRecipient(%q) = %v, want an error containing %q", s, err, want)
		}
	}
	if _, err := Encrypt([]byte(secretYAML), []string{"age1short"}, now); err == nil {
		t.Error("Encrypt accepted an invalid recipient")
	}
	if _, err := Encrypt([]byte(secretYAML), nil, now); err == nil {
		t.Error("Encrypt accepted no recipients")
	}
}

func TestCreationRulesDriveSopsCLI(t *testing.T) {
	a, b := newIdentity(t), newIdentity(t)
	dir := t.TempDir()
	rules := CreationRules([]string{a.Recipient().String(), b.Recipient().String()})
	if err := os.WriteFile(filepath.Join(dir, ".sops.yaml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "prod", "secrets")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"secret.yaml", filepath.Join("prod", "secrets", "db.yaml")} {
		t.Run(rel, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, rel), []byte(secretYAML), 0o600); err != nil {
				t.Fatal(err)
			}
			enc, err := runSops(t, dir, "", "-e", rel)
			if err != nil {
				t.Fatalf("sops -e with .sops.yaml:\n%s\n%v", rules, err)
			}
			assertNoPlaintext(t, enc)
			if !bytes.Contains(enc, []byte("namespace: prod")) || !bytes.Contains(enc, []byte("encrypted_regex: ^(data|stringData)$")) {
				t.Errorf("not only data/stringData are encrypted:\n%s", enc)
			}
			assertRecipients(t, enc, a, b)
			plain, err := Decrypt(enc, []string{b.String()})
			if err != nil {
				t.Fatal(err)
			}
			sameYAML(t, plain, []byte(secretYAML))
		})
	}
}

func TestEncryptIsRandomised(t *testing.T) {
	id := newIdentity(t)
	r := []string{id.Recipient().String()}
	one, err := Encrypt([]byte(secretYAML), r, now)
	if err != nil {
		t.Fatal(err)
	}
	two, err := Encrypt([]byte(secretYAML), r, now)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(one, two) {
		t.Fatal("two encryptions of the same document are byte-identical")
	}
	for _, enc := range [][]byte{one, two} {
		plain, err := Decrypt(enc, []string{id.String()})
		if err != nil {
			t.Fatal(err)
		}
		sameYAML(t, plain, []byte(secretYAML))
		viaCLI, err := sopsDecrypt(t, enc, id.String())
		if err != nil {
			t.Fatal(err)
		}
		sameYAML(t, viaCLI, []byte(secretYAML))
	}
}

// TestMACOnlyEncryptedSeed pins the seed sops starts a mac_only_encrypted MAC with
// (MACOnlyEncryptedInitialization in sops.go).
func TestMACOnlyEncryptedSeed(t *testing.T) {
	want := []byte{0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0xb,
		0xb, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69}
	if got := sha256.Sum256([]byte("sops")); !bytes.Equal(got[:], want) {
		t.Errorf("SHA-256(sops) = %x, want %x", got, want)
	}
}

func BenchmarkEncryptSecret(b *testing.B) {
	const doc = `apiVersion: v1
kind: Secret
metadata:
  name: app
  namespace: default
type: Opaque
data:
  a: ` + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB" + `
  b: ` + "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJC" + `
  c: ` + "Q0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0ND" + `
  d: ` + "RERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERERE" + `
  e: ` + "RUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVFRUVF" + `
`
	id := newIdentity(b)
	r := []string{id.Recipient().String()}
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Encrypt([]byte(doc), r, now); err != nil {
			b.Fatal(err)
		}
	}
}

// assertRecipients checks that doc is encrypted for exactly the identities' recipients.
func assertRecipients(t testing.TB, doc []byte, ids ...*age.X25519Identity) {
	t.Helper()
	got, err := Recipients(doc)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, id := range ids {
		want = append(want, id.Recipient().String())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Recipients = %v, want %v", got, want)
	}
}
