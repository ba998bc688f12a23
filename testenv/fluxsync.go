package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// FluxSync says what Flux syncs from Git: a GitRepository and a Kustomization of one name in one
// namespace, the Kustomization building Path of the repository's Branch.
type FluxSync struct {
	Namespace, Name string
	// URL is the repository's clone URL (GitServer.RepoURL). Username and Password, when set, go
	// into a Secret of the same name that the GitRepository authenticates with.
	URL, Username, Password string
	// Branch is the branch followed, "main" when empty.
	Branch string
	// Path is the folder of the repository the Kustomization builds, "./" when empty.
	Path string
	// Interval is how often each object is reconciled, 2s when zero. A new commit reaches the
	// cluster within about one Interval: kustomize-controller applies each new artifact of the
	// GitRepository at once.
	Interval time.Duration
}

// Sync creates (or updates) the namespace, Secret, GitRepository and Kustomization of s. The
// Kustomization prunes what leaves the repository and does not wait for what it applies to
// become ready: testenv runs no controller-manager, so no Deployment ever does.
func (f *FluxControllers) Sync(tb testing.TB, s FluxSync) {
	tb.Helper()
	f.Apply(tb, s.manifests())
}

// manifests are the YAML documents of s. Values are quoted as JSON strings, which YAML reads as
// they are.
func (s FluxSync) manifests() string {
	branch, path, interval := s.Branch, s.Path, s.Interval
	if branch == "" {
		branch = "main"
	}
	if path == "" {
		path = "./"
	}
	if interval == 0 {
		interval = 2 * time.Second
	}
	docs := []string{fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %q\n", s.Namespace)}
	secretRef := ""
	if s.Username != "" || s.Password != "" {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %q, namespace: %q}
stringData: {username: %q, password: %q}
`, s.Name, s.Namespace, s.Username, s.Password))
		secretRef = fmt.Sprintf("  secretRef: {name: %q}\n", s.Name)
	}
	docs = append(docs, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: %q, namespace: %q}
spec:
  interval: %q
  url: %q
  ref: {branch: %q}
`, s.Name, s.Namespace, interval, s.URL, branch)+secretRef, fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %q, namespace: %q}
spec:
  interval: %q
  path: %q
  prune: true
  wait: false
  sourceRef: {kind: GitRepository, name: %q}
`, s.Name, s.Namespace, interval, path, s.Name))
	return strings.Join(docs, "---\n")
}
