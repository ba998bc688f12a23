package testenv

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Separators for machine-readable git log output; they cannot appear in
// commit metadata written by well-behaved tools.
const (
	logRecordSep = "\x1e"
	logFieldSep  = "\x1f"
	trailerSep   = "\x1d"
	trailerKVSep = "\x1c"
	logFormat    = "%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%cn%x1f%ce%x1f%s%x1f%b%x1f" +
		"%(trailers:only,unfold,separator=%x1d,key_value_separator=%x1c)"
)

// Commit is one commit as read from a repository on disk.
type Commit struct {
	SHA                           string
	Parents                       []string
	AuthorName, AuthorEmail       string
	CommitterName, CommitterEmail string
	Subject                       string
	// Body is the message after the subject, trailers included.
	Body string
	// Trailers maps trailer keys (as written) to values; for a repeated key
	// the last value wins.
	Trailers map[string]string
}

// Signature identifies the author of a commit.
type Signature struct{ Name, Email string }

// Files lists the paths in the tree at the tip of branch, sorted. An unborn
// or missing branch has no files. An empty branch name means HEAD.
func (s *GitServer) Files(repo, branch string) ([]string, error) {
	dir, sha, err := s.tip(repo, branch)
	if err != nil || sha == "" {
		return []string{}, err
	}
	out, err := s.gitDir(dir, "ls-tree", "-r", "-z", "--name-only", sha)
	if err != nil {
		return nil, fmt.Errorf("list files of %s@%s: %w", repo, branch, err)
	}
	files := []string{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return files, nil
}

// FileHashes maps every path at the tip of branch to its git blob hash, so a test can compare a
// whole tree with expected contents (see BlobHash) in one call. An unborn branch has no files.
func (s *GitServer) FileHashes(repo, branch string) (map[string]string, error) {
	dir, sha, err := s.tip(repo, branch)
	if err != nil || sha == "" {
		return map[string]string{}, err
	}
	out, err := s.gitDir(dir, "ls-tree", "-r", "-z", sha)
	if err != nil {
		return nil, fmt.Errorf("list files of %s@%s: %w", repo, branch, err)
	}
	hashes := map[string]string{}
	for _, entry := range strings.Split(string(out), "\x00") {
		// "<mode> blob <hash>\t<path>"
		meta, path, ok := strings.Cut(entry, "\t")
		if fields := strings.Fields(meta); ok && len(fields) == 3 {
			hashes[path] = fields[2]
		}
	}
	return hashes, nil
}

// BranchTip is the commit branch points at ("" while it does not exist), read from the ref's
// file, or from packed-refs once git packed it, without starting git: a benchmark watches for
// pushes with it every few milliseconds.
func (s *GitServer) BranchTip(repo, branch string) (string, error) {
	dir, err := s.repoDir(repo)
	if err != nil {
		return "", err
	}
	if err := s.checkBranch(branch); err != nil {
		return "", err
	}
	ref := "refs/heads/" + branch
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ref)))
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s of %s: %w", ref, repo, err)
	}
	packed, err := os.ReadFile(filepath.Join(dir, "packed-refs"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read packed-refs of %s: %w", repo, err)
	}
	for line := range strings.Lines(string(packed)) { // "<sha> <ref>", "# ..." and "^<peeled sha>"
		if sha, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == ref {
			return sha, nil
		}
	}
	return "", nil
}

// TreeHash is the git object hash of the folder that holds files (path within the folder →
// blob hash, as BlobHash gives), all of mode 100644: what `git rev-parse <commit>:<folder>`
// answers when the folder holds exactly those files (see TreeAt).
func TreeHash(files map[string]string) (string, error) {
	type dir struct {
		files map[string]string
		dirs  map[string]*dir
	}
	newDir := func() *dir { return &dir{files: map[string]string{}, dirs: map[string]*dir{}} }
	root := newDir()
	for path, hash := range files {
		d, parts := root, strings.Split(path, "/")
		for _, name := range parts[:len(parts)-1] {
			if d.dirs[name] == nil {
				d.dirs[name] = newDir()
			}
			d = d.dirs[name]
		}
		d.files[parts[len(parts)-1]] = hash
	}
	var hashDir func(d *dir) ([]byte, error)
	hashDir = func(d *dir) ([]byte, error) {
		type entry struct {
			mode, name, key string // git sorts a folder as its name followed by "/"
			id              []byte
		}
		var entries []entry
		for name, hash := range d.files {
			id, err := hex.DecodeString(hash)
			if err != nil {
				return nil, fmt.Errorf("blob hash of %s: %w", name, err)
			}
			entries = append(entries, entry{"100644", name, name, id})
		}
		for name, sub := range d.dirs {
			id, err := hashDir(sub)
			if err != nil {
				return nil, err
			}
			entries = append(entries, entry{"40000", name, name + "/", id})
		}
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		var body bytes.Buffer
		for _, e := range entries {
			fmt.Fprintf(&body, "%s %s\x00", e.mode, e.name)
			body.Write(e.id)
		}
		h := sha1.New()
		_, _ = fmt.Fprintf(h, "tree %d\x00", body.Len())
		h.Write(body.Bytes())
		return h.Sum(nil), nil
	}
	id, err := hashDir(root)
	return hex.EncodeToString(id), err
}

// TreeAt is the object hash of path (a folder) at commit rev, as TreeHash computes it, or "" when
// rev has no such path: one git command, however many files the folder holds.
func (s *GitServer) TreeAt(repo, rev, path string) (string, error) {
	dir, err := s.repoDir(repo)
	if err != nil {
		return "", err
	}
	sha, err := s.resolve(dir, rev+":"+path)
	if err != nil {
		return "", fmt.Errorf("resolve %s:%s in %s: %w", rev, path, repo, err)
	}
	return sha, nil
}

// BlobHash is the git object hash of a file with this content.
func BlobHash(content []byte) string {
	h := sha1.New()
	_, _ = fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// ReadFile returns the content of path at the tip of branch.
func (s *GitServer) ReadFile(repo, branch, path string) ([]byte, error) {
	dir, sha, err := s.tip(repo, branch)
	if err != nil {
		return nil, err
	}
	if sha == "" {
		return nil, fmt.Errorf("read %s from %s@%s: branch has no commits", path, repo, branch)
	}
	out, err := s.gitDir(dir, "cat-file", "blob", sha+":"+path)
	if err != nil {
		return nil, fmt.Errorf("read %s from %s@%s: %w", path, repo, branch, err)
	}
	return out, nil
}

// Log lists the commits reachable from branch, newest first. An unborn or
// missing branch has no commits.
func (s *GitServer) Log(repo, branch string) ([]Commit, error) {
	dir, sha, err := s.tip(repo, branch)
	if err != nil || sha == "" {
		return []Commit{}, err
	}
	out, err := s.gitDir(dir, "log", "--format="+logFormat, sha)
	if err != nil {
		return nil, fmt.Errorf("log %s@%s: %w", repo, branch, err)
	}
	commits := []Commit{}
	for _, rec := range strings.Split(string(out), logRecordSep)[1:] {
		f := strings.Split(strings.TrimSuffix(rec, "\n"), logFieldSep)
		if len(f) != 9 {
			return nil, fmt.Errorf("log %s@%s: unexpected record %q", repo, branch, rec)
		}
		commits = append(commits, Commit{
			SHA: f[0], Parents: strings.Fields(f[1]),
			AuthorName: f[2], AuthorEmail: f[3],
			CommitterName: f[4], CommitterEmail: f[5],
			Subject: f[6], Body: strings.TrimSpace(f[7]),
			Trailers: parseTrailers(f[8]),
		})
	}
	return commits, nil
}

// PushCommit plays another user: it clones repo over HTTP, writes and removes
// the given files (slash-separated paths), commits with author as both author
// and committer, and pushes to branch, rebasing and retrying when the push is
// rejected as non-fast-forward. It returns the SHA of the pushed commit.
func (s *GitServer) PushCommit(repo, branch string, author Signature, message string,
	write map[string]string, remove []string) (string, error) {
	return s.pushCommit(repo, branch, "", author, message, write, remove)
}

// ForcePush plays another user rewriting history: it resets branch to the commit onto, commits
// the given changes on it as PushCommit does and force-pushes the result, dropping every commit
// after onto. It returns the SHA of the pushed commit.
func (s *GitServer) ForcePush(repo, branch, onto string, author Signature, message string,
	write map[string]string, remove []string) (string, error) {
	if onto == "" {
		return "", errors.New("force push: the commit to reset to is required")
	}
	return s.pushCommit(repo, branch, onto, author, message, write, remove)
}

// pushCommit is PushCommit, or ForcePush when onto is set.
func (s *GitServer) pushCommit(repo, branch, onto string, author Signature, message string,
	write map[string]string, remove []string) (string, error) {
	if _, err := s.repoDir(repo); err != nil {
		return "", fmt.Errorf("push commit: %w", err)
	}
	if err := s.checkBranch(branch); err != nil || branch == "" {
		return "", fmt.Errorf("push commit: invalid branch name %q", branch)
	}
	if author.Name == "" || author.Email == "" {
		return "", errors.New("push commit: author name and email are required")
	}
	work, err := os.MkdirTemp("", "gitserver-push-")
	if err != nil {
		return "", fmt.Errorf("push commit: create work dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	env := []string{
		"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email,
		"GIT_COMMITTER_NAME=" + author.Name, "GIT_COMMITTER_EMAIL=" + author.Email,
	}
	run := func(args ...string) ([]byte, error) {
		return s.git(context.Background(), work, env, args...)
	}
	wrap := func(err error) error { return fmt.Errorf("push commit to %s@%s: %w", repo, branch, err) }
	if err := s.checkoutForPush(run, repo, branch); err != nil {
		return "", wrap(err)
	}
	if onto != "" {
		if _, err := run("reset", "--quiet", "--hard", onto); err != nil {
			return "", wrap(err)
		}
	}
	if err := applyChanges(work, write, remove); err != nil {
		return "", wrap(err)
	}
	if err := runAll(run, []string{"add", "--all"},
		[]string{"commit", "--quiet", "--allow-empty", "--no-verify", "-m", message}); err != nil {
		return "", wrap(err)
	}
	push := pushRebasing
	if onto != "" {
		push = pushForced
	}
	if err := push(run, branch); err != nil {
		return "", wrap(err)
	}
	out, err := run("rev-parse", "HEAD")
	if err != nil {
		return "", wrap(err)
	}
	return strings.TrimSpace(string(out)), nil
}

// pushAttempts bounds PushCommit's rebase-and-retry loop.
const pushAttempts = 10

// pushRebasing pushes HEAD to branch, rebasing and retrying when the push is rejected as
// non-fast-forward.
func pushRebasing(run func(...string) ([]byte, error), branch string) error {
	for attempt := 1; ; attempt++ {
		_, err := run("push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
		if err == nil {
			return nil
		}
		if attempt == pushAttempts || !isNonFastForward(err) {
			return fmt.Errorf("attempt %d: %w", attempt, err)
		}
		if err := runAll(run, []string{"fetch", "--quiet", "origin"},
			[]string{"rebase", "--quiet", "origin/" + branch}); err != nil {
			return err
		}
	}
}

// pushForced replaces branch with HEAD.
func pushForced(run func(...string) ([]byte, error), branch string) error {
	_, err := run("push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+branch)
	return err
}

// checkoutForPush prepares the current directory of run as a clone of repo
// with branch checked out, or unborn when the remote does not have it yet.
func (s *GitServer) checkoutForPush(run func(...string) ([]byte, error), repo, branch string) error {
	if err := runAll(run, []string{"init", "--quiet", "--initial-branch=" + branch},
		[]string{"remote", "add", "origin", s.AuthURL(repo)},
		[]string{"fetch", "--quiet", "origin"}); err != nil {
		return err
	}
	remote := "refs/remotes/origin/" + branch
	if _, err := run("rev-parse", "--verify", "--quiet", remote); err != nil {
		return nil // branch not on the remote yet: commit on the unborn branch
	}
	_, err := run("checkout", "--quiet", "-B", branch, remote)
	return err
}

// runAll runs git commands in order, stopping at the first failure.
func runAll(run func(...string) ([]byte, error), commands ...[]string) error {
	for _, args := range commands {
		if _, err := run(args...); err != nil {
			return err
		}
	}
	return nil
}

// applyChanges writes and removes files below dir; paths must stay inside
// the work tree and out of .git.
func applyChanges(dir string, write map[string]string, remove []string) error {
	for path, content := range write {
		full, err := workTreePath(dir, path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	for _, path := range remove {
		full, err := workTreePath(dir, path)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(full); err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		if err := os.RemoveAll(full); err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
	}
	return nil
}

// workTreePath maps a slash-separated path to a file below dir.
func workTreePath(dir, path string) (string, error) {
	local := filepath.FromSlash(path)
	first, _, _ := strings.Cut(path, "/")
	if !filepath.IsLocal(local) || first == ".git" {
		return "", fmt.Errorf("path %q is outside the work tree", path)
	}
	return filepath.Join(dir, local), nil
}

// isNonFastForward reports whether a push failed because the remote branch
// moved on, or is being moved by a concurrent push.
func isNonFastForward(err error) bool {
	for _, sign := range []string{"non-fast-forward", "fetch first", "[rejected]",
		"cannot lock ref", "failed to update ref"} { // the last two: a concurrent push holds the ref
		if strings.Contains(err.Error(), sign) {
			return true
		}
	}
	return false
}

// parseTrailers reads the output of %(trailers) formatted with trailerSep
// between trailers and trailerKVSep between key and value.
func parseTrailers(s string) map[string]string {
	trailers := map[string]string{}
	for _, t := range strings.Split(s, trailerSep) {
		if k, v, ok := strings.Cut(t, trailerKVSep); ok {
			trailers[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return trailers
}

// tip resolves branch ("" for HEAD) in repo to its commit SHA, or "" when the
// branch is unborn or missing. It also returns the repository directory.
func (s *GitServer) tip(repo, branch string) (dir, sha string, err error) {
	if dir, err = s.repoDir(repo); err != nil {
		return "", "", err
	}
	if _, err := os.Stat(dir); err != nil {
		return "", "", fmt.Errorf("open repo %q: %w", repo, err)
	}
	ref := "HEAD"
	if branch != "" {
		if err := s.checkBranch(branch); err != nil {
			return "", "", err
		}
		ref = "refs/heads/" + branch
	}
	sha, err = s.resolve(dir, ref+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("resolve %s@%s: %w", repo, branch, err)
	}
	return dir, sha, nil
}

// resolve is the object name git gives rev in the repository at dir, "" when there is none.
func (s *GitServer) resolve(dir, rev string) (string, error) {
	out, err := s.gitDir(dir, "rev-parse", "--verify", "--quiet", rev)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return "", nil // --quiet --verify exits 1 when rev names nothing
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// checkBranch refuses names git would not accept as a branch, so a name can
// never be read as a revision expression such as "main~1". git is asked once per name:
// BranchTip checks its branch every few milliseconds.
func (s *GitServer) checkBranch(branch string) error {
	if _, ok := s.branches.Load(branch); ok {
		return nil
	}
	if strings.HasPrefix(branch, "-") {
		return fmt.Errorf("invalid branch name %q", branch)
	}
	if _, err := s.git(context.Background(), "", nil, "check-ref-format", "refs/heads/"+branch); err != nil {
		return fmt.Errorf("invalid branch name %q", branch)
	}
	s.branches.Store(branch, true)
	return nil
}

// gitDir runs git against the bare repository in dir.
func (s *GitServer) gitDir(dir string, args ...string) ([]byte, error) {
	return s.git(context.Background(), dir, nil, args...)
}

// git runs the git CLI in dir (the current directory if empty) with the
// server's isolated environment plus extraEnv, and returns its stdout. The
// error includes git's stderr and wraps *exec.ExitError.
func (s *GitServer) git(ctx context.Context, dir string, extraEnv []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, gitCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.gitPath, args...)
	cmd.Dir = dir
	cmd.Env = append(s.gitEnv(), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
