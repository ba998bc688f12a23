package gitops

import (
	"bytes"
	"errors"
	"strings"
)

// Signer signs commits: Sign returns the armored signature of a commit's bytes without its
// gpgsig header, which is what git verifies; Public is the key to register with the Git host.
// Package gitsecrets makes them from the keys in Secrets.
type Signer interface {
	Sign(commit []byte) ([]byte, error)
	Public() SigningKey
}

// signCommit adds the gpgsig header to a commit: the signature of the bytes without it, each of
// its lines after the first indented by one space, after the committer line.
func signCommit(commit []byte, s Signer) ([]byte, error) {
	sig, err := s.Sign(commit)
	if err != nil {
		return nil, err
	}
	end := bytes.Index(commit, []byte("\n\n"))
	if end < 0 {
		return nil, errors.New("sign commit: no end of headers")
	}
	header := "gpgsig " + strings.ReplaceAll(strings.TrimRight(string(sig), "\n"), "\n", "\n ") + "\n"
	out := make([]byte, 0, len(commit)+len(header))
	out = append(out, commit[:end+1]...)
	out = append(out, header...)
	return append(out, commit[end+1:]...), nil
}
