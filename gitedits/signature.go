package gitedits

import (
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitstore"
)

// signatureOf is who an author line credits: the name and email as git splits them
// (gitstore.ParseIdent), cleaned (gitops.Signature.Clean) so that a commit written by hand can
// put no '<', '>' or line break into the commit that records its edit.
func signatureOf(id gitstore.Ident) gitops.Signature {
	return gitops.Signature{Name: id.Name, Email: id.Email}.Clean()
}
