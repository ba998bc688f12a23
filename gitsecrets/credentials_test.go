package gitsecrets

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/configbutler/gitops-reverser/gitops"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sshKey makes a throwaway ed25519 identity and a known_hosts line for it.
func sshKey(t *testing.T) (identity, knownHosts string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "test")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), "git.example.com " + string(ssh.MarshalAuthorizedKey(sshPub))
}

func TestCredentialsFromFluxStyleSecrets(t *testing.T) {
	testIdentity, testKnownHosts := sshKey(t)
	cases := []struct {
		name    string
		data    map[string]string
		check   func(t *testing.T, c gitops.Credentials)
		wantErr string
	}{
		{name: "username and password", data: map[string]string{"username": "u", "password": "p"}, check: func(t *testing.T, c gitops.Credentials) {
			if a, ok := c.Auth.(*githttp.BasicAuth); !ok || a.Username != "u" || a.Password != "p" {
				t.Errorf("auth = %#v", c.Auth)
			}
		}},
		{name: "token as password", data: map[string]string{"password": "tok"}, check: func(t *testing.T, c gitops.Credentials) {
			if a, ok := c.Auth.(*githttp.BasicAuth); !ok || a.Password != "tok" || a.Username == "" {
				t.Errorf("auth = %#v", c.Auth)
			}
		}},
		{name: "bearer token", data: map[string]string{"bearerToken": "b"}, check: func(t *testing.T, c gitops.Credentials) {
			if a, ok := c.Auth.(*githttp.TokenAuth); !ok || a.Token != "b" {
				t.Errorf("auth = %#v", c.Auth)
			}
		}},
		{name: "ssh identity with known_hosts", data: map[string]string{"identity": testIdentity, "known_hosts": testKnownHosts},
			check: func(t *testing.T, c gitops.Credentials) {
				if a, ok := c.Auth.(*gitssh.PublicKeys); !ok || a.HostKeyCallback == nil {
					t.Errorf("auth = %#v", c.Auth)
				}
			}},
		{name: "ssh identity without known_hosts is refused", data: map[string]string{"identity": testIdentity}, wantErr: "no known_hosts"},
		{name: "unparseable identity", data: map[string]string{"identity": "nope", "known_hosts": testKnownHosts}, wantErr: "identity"},
		{name: "no usable key", data: map[string]string{"user": "x"}, wantErr: "has none of"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{}}
			for k, v := range tc.data {
				secret.Data[k] = []byte(v)
			}
			c, err := credentialsFrom(secret, t.TempDir())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestRotatedSecretChangesTheKey(t *testing.T) {
	a, _ := credentialsFrom(&corev1.Secret{Data: map[string][]byte{"password": []byte("one")}}, t.TempDir())
	b, _ := credentialsFrom(&corev1.Secret{Data: map[string][]byte{"password": []byte("two")}}, t.TempDir())
	if a.Key == b.Key {
		t.Fatal("a rotated password kept the same credentials key: the worker would not restart")
	}
}
