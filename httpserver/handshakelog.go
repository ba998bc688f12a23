package httpserver

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
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
// passed on at most once per interval per source IP; the next one passed on says how many were
// left out. Every other line passes through. Safe for concurrent use.
type handshakeLog struct {
	next     io.Writer
	interval time.Duration
	capacity int
	now      func() time.Time // the clock; tests replace it before Run

	mu      sync.Mutex
	sources map[string]*handshakeSource
}

// handshakeSource is one source IP's current window.
type handshakeSource struct {
	since   time.Time // when its last line was passed on
	dropped int       // lines left out since
}

func newHandshakeLog(next io.Writer) *handshakeLog {
	return &handshakeLog{
		next: next, interval: handshakeLogInterval, capacity: handshakeLogSources, now: time.Now,
		sources: map[string]*handshakeSource{},
	}
}

func (h *handshakeLog) Write(p []byte) (int, error) {
	ip, ok := handshakeSourceIP(string(p))
	if !ok {
		return h.next.Write(p)
	}
	dropped, pass := h.admit(ip)
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

// admit says whether a line from ip is passed on, and how many were left out before it.
func (h *handshakeLog) admit(ip string) (dropped int, pass bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	s := h.sources[ip]
	if s != nil && now.Sub(s.since) < h.interval {
		s.dropped++
		return 0, false
	}
	if s == nil {
		h.makeRoomLocked(now)
		s = &handshakeSource{}
		h.sources[ip] = s
	}
	dropped = s.dropped
	s.since, s.dropped = now, 0
	return dropped, true
}

// makeRoomLocked forgets the sources whose window ended, and when every one is still current,
// the one whose window started first, so there is room for one more.
func (h *handshakeLog) makeRoomLocked(now time.Time) {
	if len(h.sources) < h.capacity {
		return
	}
	var oldest string
	for ip, s := range h.sources {
		if now.Sub(s.since) >= h.interval {
			delete(h.sources, ip)
			continue
		}
		if oldest == "" || s.since.Before(h.sources[oldest].since) {
			oldest = ip
		}
	}
	if len(h.sources) >= h.capacity {
		delete(h.sources, oldest)
	}
}

// droppedFrom is how many lines of ip were left out in its current window.
func (h *handshakeLog) droppedFrom(ip string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.sources[ip]; s != nil {
		return s.dropped
	}
	return 0
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
