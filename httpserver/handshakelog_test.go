package httpserver

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/configbutler/gitops-reverser/testenv"
)

// linesWith returns the lines of log that contain s.
func linesWith(log *testenv.SyncBuffer, s string) []string {
	var out []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// failHandshake dials s from the loopback address from and fails the handshake as a client that
// does not trust the server's certificate does.
func failHandshake(t *testing.T, s *Server, from string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", s.Addr(), &tls.Config{MinVersion: tls.VersionTLS12})
	if err == nil {
		_ = conn.Close()
		t.Fatal("a client without the server's CA completed the handshake")
	}
}

func TestFailedHandshakesAreLoggedOnceAMinutePerSource(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	clock := testenv.NewClock(time.Now())
	dir := t.TempDir()
	writeServingPair(t, dir, newTestCA(t))
	s, err := Listen(Config{Name: "test", BindAddress: "127.0.0.1:0", CertDir: dir, Handler: hello,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.handshakes.now = clock.Now // before Run: nothing reads it yet
	runListening(t, s)

	const attempts = 5
	sources := []string{"127.0.0.1", "127.0.0.2"}
	for _, src := range sources {
		for range attempts {
			failHandshake(t, s, src)
		}
	}
	for _, src := range sources {
		waitFor(t, "every failed handshake of "+src+" to reach the log", func() bool {
			return s.handshakes.throttle.droppedFrom(src) == attempts-1
		})
		if got := linesWith(logs, "TLS handshake error from "+src+":"); len(got) != 1 {
			t.Fatalf("%d failed handshakes from %s logged %d lines, want 1:\n%s", attempts, src, len(got), strings.Join(got, "\n"))
		}
	}
	if got := linesWith(logs, "level=WARN"); len(got) != len(sources) {
		t.Fatalf("%d warnings, want one per source:\n%s", len(got), strings.Join(got, "\n"))
	}

	clock.Advance(handshakeLogInterval)
	failHandshake(t, s, sources[0])
	want := fmt.Sprintf("and %d more failed handshakes from %s not logged", attempts-1, sources[0])
	waitFor(t, "a line after the interval", func() bool { return len(linesWith(logs, want)) == 1 })
	if got := linesWith(logs, "TLS handshake error from "+sources[1]+":"); len(got) != 1 {
		t.Fatalf("%s, quiet since, logged again: %q", sources[1], got)
	}
}

func TestHandshakeLogPassesOtherLinesAndStaysBounded(t *testing.T) {
	out := &testenv.SyncBuffer{}
	h := newHandshakeLog(out)
	clock := testenv.NewClock(time.Now())
	h.now, h.throttle = clock.Now, NewThrottle(handshakeLogInterval, 3)

	for range 3 {
		_, _ = h.Write([]byte("http: superfluous response.WriteHeader call\n"))
	}
	if got := linesWith(out, "superfluous"); len(got) != 3 {
		t.Fatalf("other lines: %d passed, want all 3", len(got))
	}
	for i := range 10 {
		_, _ = fmt.Fprintf(h, "%s10.0.0.%d:4242: EOF\n", handshakeErrorPrefix, i)
		clock.Advance(time.Second)
	}
	if len(h.throttle.keys) > h.throttle.capacity {
		t.Fatalf("%d sources remembered, want at most %d", len(h.throttle.keys), h.throttle.capacity)
	}
	if got := linesWith(out, "handshake error"); len(got) != 10 {
		t.Fatalf("10 new sources logged %d lines, want 10", len(got))
	}
	_, _ = fmt.Fprintf(h, "%s[::1]:4242: EOF\n", handshakeErrorPrefix)
	_, _ = fmt.Fprintf(h, "%s[::1]:4343: EOF\n", handshakeErrorPrefix)
	if got := linesWith(out, "[::1]"); len(got) != 1 || h.throttle.droppedFrom("::1") != 1 {
		t.Fatalf("an IPv6 source from two ports logged %d lines, want 1", len(got))
	}
}
