package gitsecrets

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	corev1 "k8s.io/api/core/v1"

	"github.com/configbutler/gitops-reverser/gitops"
)

// errSecret is a credentials problem the user must fix; its message goes into the status.
type errSecret struct{ msg string }

func (e errSecret) Error() string { return e.msg }

// credentialsFrom reads a Secret with the keys Flux users already use: username + password
// (HTTPS basic, or a token as the password), bearerToken, or identity + known_hosts for SSH.
// known_hosts is required for SSH: a host key is never accepted blindly. Unusable content is an
// errSecret. The token of the Git host's API, for pull requests, is the key token, else the
// password or bearerToken of HTTPS (with SSH, password is the key's passphrase).
func credentialsFrom(secret *corev1.Secret, workDir string) (gitops.Credentials, error) {
	c, err := gitCredentialsFrom(secret, workDir)
	if err == nil {
		d := secret.Data
		switch {
		case len(d["token"]) > 0:
			c.APIToken = string(d["token"])
		case len(d["identity"]) > 0: // password is the key's passphrase
		case len(d["bearerToken"]) > 0:
			c.APIToken = string(d["bearerToken"])
		default:
			c.APIToken = string(d["password"])
		}
	}
	return c, err
}

func gitCredentialsFrom(secret *corev1.Secret, workDir string) (gitops.Credentials, error) {
	d := secret.Data
	h := sha256.New()
	for _, k := range []string{"username", "password", "bearerToken", "identity", "known_hosts", "token"} {
		h.Write([]byte(k + "\x00"))
		h.Write(d[k])
		h.Write([]byte{0})
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	switch {
	case len(d["identity"]) > 0:
		if len(d["known_hosts"]) == 0 {
			return gitops.Credentials{}, errSecret{fmt.Sprintf("Secret %s/%s has identity but no known_hosts", secret.Namespace, secret.Name)}
		}
		keys, err := gitssh.NewPublicKeys("git", d["identity"], string(d["password"]))
		if err != nil {
			return gitops.Credentials{}, errSecret{fmt.Sprintf("Secret %s/%s: identity: %v", secret.Namespace, secret.Name, err)}
		}
		path := filepath.Join(workDir, "known_hosts-"+key)
		if err := os.MkdirAll(workDir, 0o700); err != nil {
			return gitops.Credentials{}, fmt.Errorf("create work dir: %w", err)
		}
		if err := os.WriteFile(path, d["known_hosts"], 0o600); err != nil {
			return gitops.Credentials{}, fmt.Errorf("write known_hosts: %w", err)
		}
		if keys.HostKeyCallback, err = gitssh.NewKnownHostsCallback(path); err != nil {
			return gitops.Credentials{}, errSecret{fmt.Sprintf("Secret %s/%s: known_hosts: %v", secret.Namespace, secret.Name, err)}
		}
		return gitops.Credentials{Auth: keys, Key: key}, nil
	case len(d["bearerToken"]) > 0:
		return gitops.Credentials{Auth: &githttp.TokenAuth{Token: string(d["bearerToken"])}, Key: key}, nil
	case len(d["password"]) > 0:
		user := string(d["username"])
		if user == "" {
			user = "git" // a token as password: hosts ignore the user name
		}
		return gitops.Credentials{Auth: &githttp.BasicAuth{Username: user, Password: string(d["password"])}, Key: key}, nil
	}
	return gitops.Credentials{}, errSecret{fmt.Sprintf("Secret %s/%s has none of username/password, bearerToken, identity", secret.Namespace, secret.Name)}
}
