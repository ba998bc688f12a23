package testenv

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of the Git test server. They are generous because tests push large
// commits, but finite so a runaway client cannot exhaust the machine.
const (
	gitMaxBodyBytes       = 512 << 20
	gitMemBodyBytes       = 4 << 20 // chunked bodies above this are buffered on disk
	gitReadHeaderTimeout  = 10 * time.Second
	gitReadTimeout        = 5 * time.Minute
	gitWriteTimeout       = 5 * time.Minute
	gitIdleTimeout        = 60 * time.Second
	gitMaxHeaderBytes     = 64 << 10
	gitShutdownTimeout    = 10 * time.Second
	gitDefaultBranch      = "main"
	gitCommandTimeout     = 2 * time.Minute
	gitUnavailableMessage = "git server unavailable (simulated outage)\n"
)

// repoNamePattern admits only plain names so a repository can never resolve
// outside the server root, nor be read as a command-line option.
var repoNamePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// GitServer serves bare repositories under Root over smart HTTP, using
// `git http-backend` as a CGI program. Every request needs HTTP basic auth with
// Username and Password; authenticated users may push.
type GitServer struct {
	// URL is the base address, http://127.0.0.1:port, without a trailing slash.
	URL string
	// Root is the directory holding the bare repositories (<name>.git).
	Root string
	// Username and Password are the only accepted basic-auth credentials.
	Username, Password string

	gitPath   string
	home      string // empty HOME so no user git config leaks in
	srv       *http.Server
	served    chan struct{}
	down      atomic.Bool
	hangMu    sync.Mutex
	hang      chan struct{} // while set, requests wait for it to close
	requests  atomic.Int64
	pushed    atomic.Int64 // bytes of receive-pack requests: commands and packs
	thinless  atomic.Bool  // refuse thin packs, as a git built to does
	branches  sync.Map     // branch names git accepted (checkBranch), so each is checked once
	closeOnce sync.Once
	closeErr  error
}

// StartGitServer listens on a random loopback port and serves the bare
// repositories in root (created if missing). Call Close to stop it.
func StartGitServer(root, username, password string) (*GitServer, error) {
	if username == "" || password == "" {
		return nil, errors.New("start git server: username and password are required")
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("start git server: find git: %w", err)
	}
	if gitPath, err = filepath.Abs(gitPath); err != nil {
		return nil, fmt.Errorf("start git server: resolve git path: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, fmt.Errorf("start git server: resolve root: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("start git server: create root: %w", err)
	}
	home, err := os.MkdirTemp("", "gitserver-home-")
	if err != nil {
		return nil, fmt.Errorf("start git server: create home: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(home)
		return nil, fmt.Errorf("start git server: listen: %w", err)
	}
	s := &GitServer{
		URL:      "http://" + ln.Addr().String(),
		Root:     root,
		Username: username,
		Password: password,
		gitPath:  gitPath,
		home:     home,
		served:   make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.Handle("/", s.handler())
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: gitReadHeaderTimeout,
		ReadTimeout:       gitReadTimeout,
		WriteTimeout:      gitWriteTimeout,
		IdleTimeout:       gitIdleTimeout,
		MaxHeaderBytes:    gitMaxHeaderBytes,
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // always returns an error; ErrServerClosed after Close
	}()
	return s, nil
}

// Close shuts the server down, waits for in-flight requests (bounded by a
// timeout) and removes the server's private HOME. The repositories under Root
// are left in place. Close is safe to call more than once.
func (s *GitServer) Close() error {
	s.closeOnce.Do(func() {
		s.SetHanging(false)
		ctx, cancel := context.WithTimeout(context.Background(), gitShutdownTimeout)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.closeErr = fmt.Errorf("shut down git server: %w", err)
		}
		<-s.served
		if err := os.RemoveAll(s.home); err != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("remove git server home: %w", err)
		}
	})
	return s.closeErr
}

// CreateRepo initialises an empty bare repository whose default branch is
// "main" and returns its clone URL (without credentials). Creating an
// existing repository again is harmless: git only re-initialises it.
func (s *GitServer) CreateRepo(name string) (string, error) {
	dir, err := s.repoDir(name)
	if err != nil {
		return "", fmt.Errorf("create repo: %w", err)
	}
	if _, err := s.git(context.Background(), "", nil, "init", "--quiet", "--bare",
		"--initial-branch="+gitDefaultBranch, dir); err != nil {
		return "", fmt.Errorf("create repo %q: %w", name, err)
	}
	return s.RepoURL(name), nil
}

// UpkeepByHand stops pushes to repository name from starting git gc --auto, as at a Git host
// that does its repositories' upkeep on machines of its own: a benchmark calls Upkeep between
// its measurements instead of having a repack take the cores it measures at a moment it does
// not choose.
func (s *GitServer) UpkeepByHand(name string) error {
	dir, err := s.repoDir(name)
	if err == nil {
		_, err = s.gitDir(dir, "config", "receive.autogc", "false")
	}
	if err != nil {
		return fmt.Errorf("upkeep of %q by hand: %w", name, err)
	}
	return nil
}

// Upkeep does now what a push to repository name would have started: git gc --auto, which
// repacks once there are more than 50 packs or about 6,700 loose objects, and else does nothing.
func (s *GitServer) Upkeep(name string) error {
	dir, err := s.repoDir(name)
	if err == nil {
		_, err = s.gitDir(dir, "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet")
	}
	if err != nil {
		return fmt.Errorf("upkeep of %q: %w", name, err)
	}
	return nil
}

// RepoURL is the clone URL of repository name, without credentials.
func (s *GitServer) RepoURL(name string) string {
	return s.URL + "/" + strings.TrimSuffix(name, ".git") + ".git"
}

// AuthURL is the clone URL of repository name with the server's credentials
// embedded, so the git CLI can use it without prompting.
func (s *GitServer) AuthURL(name string) string {
	u, err := url.Parse(s.RepoURL(name))
	if err != nil {
		return s.RepoURL(name) // cannot happen: URL is built from a parsed address
	}
	u.User = url.UserPassword(s.Username, s.Password)
	return u.String()
}

// SetAvailable toggles a simulated outage: while false, every request is
// answered with 503 Service Unavailable.
func (s *GitServer) SetAvailable(up bool) { s.down.Store(!up) }

// SetHanging simulates a remote that accepts connections and never answers: while true, every
// request waits, until SetHanging(false) lets it through or its client gives up.
func (s *GitServer) SetHanging(hang bool) {
	s.hangMu.Lock()
	defer s.hangMu.Unlock()
	switch {
	case hang && s.hang == nil:
		s.hang = make(chan struct{})
	case !hang && s.hang != nil:
		close(s.hang)
		s.hang = nil
	}
}

func (s *GitServer) hanging() chan struct{} {
	s.hangMu.Lock()
	defer s.hangMu.Unlock()
	return s.hang
}

// Requests is the number of HTTP requests received so far, including
// rejected ones.
func (s *GitServer) Requests() int64 { return s.requests.Load() }

// PushedBytes is the number of bytes pushed so far: the bodies of receive-pack requests, which
// are the ref updates and the packs.
func (s *GitServer) PushedBytes() int64 { return s.pushed.Load() }

// SetRefusingThinPacks makes receive-pack refuse packs whose deltas refer to objects outside
// them (git's own --reject-thin-pack-for-testing, with every pack indexed rather than unpacked),
// which git does not advertise: as a remote that cannot complete thin packs.
func (s *GitServer) SetRefusingThinPacks(refuse bool) { s.thinless.Store(refuse) }

// thinlessExecPath is a git exec path whose git runs receive-pack refusing thin packs: git
// http-backend starts receive-pack as "git receive-pack" from its exec path. Everything else
// links to git's own.
func (s *GitServer) thinlessExecPath() (string, error) {
	dir := filepath.Join(s.home, "thinless")
	if _, err := os.Stat(filepath.Join(dir, "git")); err == nil {
		return dir, nil
	}
	out, err := exec.Command(s.gitPath, "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("find git's exec path: %w", err)
	}
	own := strings.TrimSpace(string(out))
	entries, err := os.ReadDir(own)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() != "git" {
			if err := os.Symlink(filepath.Join(own, e.Name()), filepath.Join(dir, e.Name())); err != nil && !os.IsExist(err) {
				return "", err
			}
		}
	}
	git := filepath.Join(own, "git")
	script := "#!/bin/sh\nif [ \"$1\" = receive-pack ]; then shift; exec " + git +
		" -c receive.unpackLimit=1 receive-pack --reject-thin-pack-for-testing \"$@\"; fi\nexec " + git + " \"$@\"\n"
	return dir, os.WriteFile(filepath.Join(dir, "git"), []byte(script), 0o755)
}

// repoDir maps a repository name to its directory under Root, refusing names
// that could escape it.
func (s *GitServer) repoDir(name string) (string, error) {
	name = strings.TrimSuffix(name, ".git")
	if !repoNamePattern.MatchString(name) {
		return "", fmt.Errorf("invalid repository name %q", name)
	}
	return filepath.Join(s.Root, name+".git"), nil
}

// handler answers outages, then authentication, then hands the request to
// git http-backend.
func (s *GitServer) handler() http.Handler {
	backend := s.backend()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if hang := s.hanging(); hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		if s.down.Load() {
			http.Error(w, gitUnavailableMessage, http.StatusServiceUnavailable)
			return
		}
		user, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required\n", http.StatusUnauthorized)
			return
		}
		backend(w, r, user)
	})
}

// authenticate checks basic-auth credentials in constant time.
func (s *GitServer) authenticate(r *http.Request) (string, bool) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return "", false
	}
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(s.Username))
	passOK := subtle.ConstantTimeCompare([]byte(pass), []byte(s.Password))
	return user, userOK&passOK == 1
}

// backend runs git http-backend for one authenticated request. REMOTE_USER
// is what makes http-backend accept pushes.
func (s *GitServer) backend() func(http.ResponseWriter, *http.Request, string) {
	env := append(s.gitEnv(), "GIT_PROJECT_ROOT="+s.Root, "GIT_HTTP_EXPORT_ALL=1")
	return func(w http.ResponseWriter, r *http.Request, user string) {
		release, err := bufferBody(w, r, gitMaxBodyBytes)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes\n", tooLarge.Limit),
					http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "read request body: "+err.Error()+"\n", http.StatusBadRequest)
			return
		}
		defer release()
		if strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			s.pushed.Add(r.ContentLength)
		}
		reqEnv := append(env[:len(env):len(env)], "REMOTE_USER="+user)
		if s.thinless.Load() {
			dir, err := s.thinlessExecPath()
			if err != nil {
				http.Error(w, err.Error()+"\n", http.StatusInternalServerError)
				return
			}
			reqEnv = append(reqEnv, "GIT_EXEC_PATH="+dir)
		}
		h := &cgi.Handler{
			Path:   s.gitPath,
			Args:   []string{"http-backend"},
			Dir:    s.Root,
			Env:    reqEnv,
			Stderr: os.Stderr,
		}
		h.ServeHTTP(w, r)
	}
}

// gitEnv is the complete environment for every git process the server runs,
// isolated from the machine's and the user's git configuration.
func (s *GitServer) gitEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{
		"PATH=" + path,
		"HOME=" + s.home,
		"XDG_CONFIG_HOME=" + filepath.Join(s.home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"LC_ALL=C",
	}
}

// bufferBody gives r's body a known length, because net/http/cgi refuses
// chunked request bodies and the git CLI sends pushes over 1 MiB chunked.
// Small bodies are kept in memory, larger ones spill to a temporary file; all
// are capped at limit. The returned func releases the buffer.
func bufferBody(w http.ResponseWriter, r *http.Request, limit int64) (func(), error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength >= 0 {
		return func() {}, nil
	}
	var mem bytes.Buffer
	n, err := io.CopyN(&mem, r.Body, gitMemBodyBytes+1)
	if errors.Is(err, io.EOF) {
		r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(&mem), n, nil
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "gitserver-body-")
	if err != nil {
		return nil, fmt.Errorf("create body buffer: %w", err)
	}
	release := func() { _ = f.Close(); _ = os.Remove(f.Name()) }
	if _, err := mem.WriteTo(f); err != nil {
		release()
		return nil, fmt.Errorf("write body buffer: %w", err)
	}
	if _, err := io.Copy(f, r.Body); err != nil {
		release()
		return nil, err // may be *http.MaxBytesError; callers check
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		release()
		return nil, fmt.Errorf("rewind body buffer: %w", err)
	}
	r.Body, r.ContentLength, r.TransferEncoding = f, size, nil
	return release, nil
}
