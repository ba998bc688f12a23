package httpserver

import (
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Bounds of the handshake log: a source whose handshakes fail (a scanner, a caller that does not
// trust our CA, an apiserver without the client certificate) costs one line a minute, and at most
// handshakeLogSources sources are remembered, so a crowd of sources cannot grow memory.
const (
	handshakeLogInterval = time.Minute
	handshakeLogSources  = 1024
)

// handshakeErrorPrefix starts the line net/http writes to ErrorLog for every failed handshake.
const handshakeErrorPrefix = "http: TLS handshake error from "

// handshakeLog is the writer behind a server's ErrorLog. Lines about failed TLS handshakes are
// passed on at most once per interval per source IP (its Throttle); the next one passed on says
// how many were left out. Every other line passes through. Safe for concurrent use.
type handshakeLog struct {
	next     io.Writer
	throttle *Throttle
	now      func() time.Time // the clock; tests replace it before Run
}

func newHandshakeLog(next io.Writer) *handshakeLog {
	return &handshakeLog{next: next, throttle: NewThrottle(handshakeLogInterval, handshakeLogSources), now: time.Now}
}

func (h *handshakeLog) Write(p []byte) (int, error) {
	ip, ok := handshakeSourceIP(string(p))
	if !ok {
		return h.next.Write(p)
	}
	dropped, pass := h.throttle.Admit(ip, h.now())
	if !pass {
		return len(p), nil
	}
	line := string(p)
	if dropped > 0 {
		line = fmt.Sprintf("%s (and %d more failed handshakes from %s not logged)\n",
			strings.TrimSuffix(line, "\n"), dropped, ip)
	}
	if _, err := io.WriteString(h.next, line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// handshakeSourceIP reads the source IP of a failed handshake's line: "http: TLS handshake error
// from 1.2.3.4:5678: EOF" gives "1.2.3.4". The port is left out: a caller retries from a new one.
func handshakeSourceIP(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, handshakeErrorPrefix)
	if !ok {
		return "", false
	}
	addr, _, ok := strings.Cut(rest, ": ")
	if !ok {
		return "", false
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host, true
	}
	return addr, true
}
