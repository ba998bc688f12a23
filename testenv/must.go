package testenv

import (
	"net"
	"testing"
)

// MustGitServer starts a Git server for the test in a temporary directory, creates the given
// repositories, and stops it when the test ends.
func MustGitServer(tb testing.TB, user, password string, repos ...string) *GitServer {
	tb.Helper()
	srv, err := StartGitServer(tb.TempDir(), user, password)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	for _, r := range repos {
		if _, err := srv.CreateRepo(r); err != nil {
			tb.Fatal(err)
		}
	}
	return srv
}

// FreeAddr returns a loopback address ("127.0.0.1:port") free for a server the test starts.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
