package webhook

import (
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/configbutler/gitops-reverser/gitops"
)

// noReplyDomain hosts the addresses we derive for users the cluster gives no e-mail address, so
// every author has a stable, obviously synthetic address that Git hosts will not link to a person.
const noReplyDomain = "users.noreply.configbutler.ai"

// signatureOf names the user who made an admission request as a commit author. Name is the
// Kubernetes username ("alice", "system:serviceaccount:ns:name"). Email is, in order: the first
// value of the "email" or "mail" extra an authenticator (OIDC, a proxy) attached; the username
// itself when it is an address; a stable address derived from the username. An empty username
// gives the zero Signature: there is no one to name.
func signatureOf(user authenticationv1.UserInfo) gitops.Signature {
	name := user.Username
	if name == "" {
		return gitops.Signature{}
	}
	for _, k := range [...]string{"email", "mail"} {
		for _, v := range user.Extra[k] {
			if v = strings.TrimSpace(v); v != "" {
				return gitops.Signature{Name: name, Email: v}
			}
		}
	}
	if strings.Contains(name, "@") {
		return gitops.Signature{Name: name, Email: name}
	}
	return gitops.Signature{Name: name, Email: strings.Map(addressChar, name) + "@" + noReplyDomain}
}

// addressChar keeps the characters that are safe in the local part of an address and turns every
// other one (':' of service accounts, spaces, non-ASCII) into '.'.
func addressChar(r rune) rune {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '_', r == '-':
		return r
	}
	return '.'
}
