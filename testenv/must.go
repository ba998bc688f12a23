package testenv

import (
	"net"
	"sync"
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

// handedOut holds every port FreeAddr gave this process: the kernel may offer a port again as
// soon as its probe listener closes, and two servers told the same port race for it.
var handedOut sync.Map

// FreeAddr returns a loopback address ("127.0.0.1:port") free for a server the test starts, never
// one it returned before in this process.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		if _, given := handedOut.LoadOrStore(addr, true); !given {
			return addr
		}
	}
}
