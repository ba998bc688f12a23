package pullrequest

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// endpoint is where a host's API answers and which repository the calls address.
type endpoint struct {
	api         string // base URL handed to the client
	owner, name string // Gitea and GitHub
	project     string // GitLab: the full project path, subgroups included
}

// repoURL is a clone URL taken apart.
type repoURL struct {
	scheme string   // http or https; https for an SSH remote, whose web UI we assume is https
	host   string   // with the port for http(s); without it for SSH (that port is SSH's)
	path   []string // segments, without a trailing .git
}

// API path suffixes the clients add themselves; a user-given API URL may carry them.
const (
	giteaAPIPath  = "/api/v1"
	gitlabAPIPath = "/api/v4"
)

// resolve derives the endpoint of a host of kind from the repository URL and the optional
// API base URL.
func resolve(kind, repository, api string) (endpoint, error) {
	r, err := parseRepoURL(repository)
	if err != nil {
		return endpoint{}, err
	}
	var base *url.URL
	if api != "" {
		if base, err = parseAPIURL(api); err != nil {
			return endpoint{}, err
		}
		r.path = stripPrefix(r, base, kind)
	}
	if len(r.path) < 2 {
		return endpoint{}, fmt.Errorf("repository URL %q: want HOST/OWNER/REPO", repository)
	}
	switch kind {
	case KindGitHub:
		return resolveGitHub(r, base, repository)
	case KindGitLab:
		ep := endpoint{project: strings.Join(r.path, "/"), api: r.scheme + "://" + r.host + gitlabAPIPath}
		if base != nil {
			ep.api = strings.TrimSuffix(base.String(), "/")
		}
		return ep, nil
	default: // Gitea: owner/repo are the last two segments, any before are the server's prefix
		n := len(r.path)
		ep := endpoint{owner: r.path[n-2], name: r.path[n-1]}
		ep.api = r.scheme + "://" + r.host + "/" + strings.Join(r.path[:n-2], "/")
		if base != nil {
			ep.api = strings.TrimSuffix(strings.TrimSuffix(base.String(), "/"), giteaAPIPath)
		}
		ep.api = strings.TrimSuffix(ep.api, "/")
		return ep, nil
	}
}

// resolveGitHub takes OWNER/REPO and picks api.github.com or the Enterprise Server's /api/v3/.
func resolveGitHub(r repoURL, base *url.URL, repository string) (endpoint, error) {
	if len(r.path) != 2 {
		return endpoint{}, fmt.Errorf("repository URL %q: want HOST/OWNER/REPO for github", repository)
	}
	ep := endpoint{owner: r.path[0], name: r.path[1]}
	switch {
	case base != nil:
		ep.api = base.String()
	case strings.EqualFold(r.host, "github.com") || strings.EqualFold(r.host, "www.github.com"):
		ep.api = "https://api.github.com/"
	default:
		ep.api = r.scheme + "://" + r.host + "/api/v3/"
	}
	if !strings.HasSuffix(ep.api, "/") {
		ep.api += "/" // go-github resolves paths against BaseURL, which must end in a slash
	}
	return ep, nil
}

// parseRepoURL reads https://host/owner/repo(.git), ssh://[user@]host[:port]/owner/repo.git and
// the scp-like [user@]host:owner/repo.git.
func parseRepoURL(raw string) (repoURL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return repoURL{}, errors.New("repository URL is empty")
	}
	var r repoURL
	var p string
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return repoURL{}, fmt.Errorf("parse repository URL: %w", err)
		}
		switch strings.ToLower(u.Scheme) {
		case "http", "https":
			r.scheme, r.host = strings.ToLower(u.Scheme), u.Host
		case "ssh", "git+ssh", "ssh+git", "git":
			r.scheme, r.host = "https", u.Hostname()
		default:
			return repoURL{}, fmt.Errorf("repository URL %q: unsupported scheme %q", raw, u.Scheme)
		}
		p = u.Path
	} else {
		hostPart, pathPart, ok := strings.Cut(raw, ":")
		if !ok || strings.Contains(hostPart, "/") {
			return repoURL{}, fmt.Errorf("repository URL %q: want https://HOST/OWNER/REPO or USER@HOST:OWNER/REPO", raw)
		}
		if i := strings.LastIndex(hostPart, "@"); i >= 0 {
			hostPart = hostPart[i+1:]
		}
		r.scheme, r.host, p = "https", hostPart, pathPart
	}
	if r.host == "" {
		return repoURL{}, fmt.Errorf("repository URL %q has no host", raw)
	}
	r.path = splitRepoPath(p)
	for _, s := range r.path {
		if s == "" || s == "." || s == ".." {
			return repoURL{}, fmt.Errorf("repository URL %q: bad path", raw)
		}
	}
	return r, nil
}

// splitRepoPath splits a repository path into segments, dropping .git and a GitLab web page's
// "/-/..." tail.
func splitRepoPath(p string) []string {
	p, _, _ = strings.Cut(p, "/-/")
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// parseAPIURL checks a user-given API base URL.
func parseAPIURL(api string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(api))
	if err != nil {
		return nil, fmt.Errorf("parse API URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("API URL %q: want http(s)://HOST[/PATH]", api)
	}
	return u, nil
}

// stripPrefix drops from the repository path the path prefix a self-hosted server is served
// under, as the API URL shows it (https://host/git/api/v1 → the repo is /git/owner/repo).
func stripPrefix(r repoURL, api *url.URL, kind string) []string {
	prefix := strings.TrimSuffix(api.Path, "/")
	switch kind {
	case KindGitea:
		prefix = strings.TrimSuffix(prefix, giteaAPIPath)
	case KindGitLab:
		prefix = strings.TrimSuffix(prefix, gitlabAPIPath)
	default:
		return r.path
	}
	pre := splitRepoPath(prefix)
	if len(pre) == 0 || len(pre) >= len(r.path) {
		return r.path
	}
	for i, s := range pre {
		if s != r.path[i] {
			return r.path
		}
	}
	return r.path[len(pre):]
}
