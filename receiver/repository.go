package receiver

import (
	"net"
	"net/url"
	"strings"
)

// SameRepository reports whether a repository reference from a payload names the repository at
// repoURL (a GitRepoConfig's spec.repoUrl). Both are normalised: the scheme (https, http, ssh, git,
// git+ssh, file, or the scp-like git@host:path) and user info are dropped, the host is lower-cased,
// default ports are dropped (a non-default port stays part of the host), a ".git" suffix and
// leading and trailing "/" are dropped, and path case is kept. A bare path ("org/repo") matches when
// it equals the URL's path, whatever the host. Empty never matches, nor does anything that does not
// parse, has another scheme, or carries a query or fragment.
func SameRepository(ref, repoURL string) bool {
	a, ok := parseRepository(ref)
	if !ok {
		return false
	}
	b, ok := parseRepository(repoURL)
	if !ok {
		return false
	}
	if a.bare || b.bare {
		return a.path == b.path
	}
	return a.host == b.host && a.path == b.path
}

// MatchesRepository reports whether any of the event's repository forms names repoURL.
func MatchesRepository(e Event, repoURL string) bool {
	for _, ref := range e.Repository {
		if SameRepository(ref, repoURL) {
			return true
		}
	}
	return false
}

// repository is a normalised repository reference.
type repository struct {
	host string // lower-case, with the port when it is not the scheme's default
	path string // no leading or trailing "/", no ".git"
	bare bool   // a path only: it matches any host
}

// defaultPorts are dropped from hosts; a scheme not listed here is not a repository URL.
var defaultPorts = map[string]string{
	"https":   "443",
	"http":    "80",
	"ssh":     "22",
	"git+ssh": "22",
	"ssh+git": "22",
	"git":     "9418",
	"file":    "",
}

func parseRepository(s string) (repository, bool) {
	s = strings.TrimSpace(s)
	var r repository
	switch {
	case s == "":
		return r, false
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil || u.Opaque != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			return r, false
		}
		def, ok := defaultPorts[u.Scheme]
		if !ok || (u.Host == "") != (u.Scheme == "file") {
			return r, false
		}
		r.host = strings.ToLower(u.Hostname())
		if p := u.Port(); p != "" && p != def {
			r.host = net.JoinHostPort(r.host, p)
		}
		r.path = u.Path
	default:
		hostPart, path, ok := strings.Cut(s, ":")
		if ok && hostPart != "" && !strings.Contains(hostPart, "/") {
			// scp-like: [user@]host:path
			if i := strings.LastIndex(hostPart, "@"); i >= 0 {
				hostPart = hostPart[i+1:]
			}
			if hostPart == "" {
				return r, false
			}
			r.host, r.path = strings.ToLower(hostPart), path
		} else {
			r.bare, r.path = true, s
		}
	}
	r.path = normalisePath(r.path)
	return r, r.path != ""
}

// normalisePath drops leading and trailing "/" and a ".git" suffix.
func normalisePath(p string) string {
	p = strings.Trim(p, "/")
	p = strings.TrimSuffix(p, ".git")
	return strings.TrimRight(p, "/")
}
