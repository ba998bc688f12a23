package restore

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Source is where the files come from: a folder on disk as it is, or a folder of a Git
// repository (a local clone, or a URL cloned with the person's own git and its credentials) at
// a commit, or as it stood at a time.
type Source struct {
	// Dir is a local folder. Without At its files are read as they are on disk; with At, from the
	// history of the Git repository it lies in.
	Dir string
	// Repo is a repository URL (or a path to a repository), cloned with git; Branch is its branch
	// (empty: the remote's default), Path the folder in it (empty: all of it).
	Repo, Branch, Path string
	// At is a commit (a hash, a tag, any revision git names) or a time: RFC 3339, "2006-01-02
	// 15:04" or "2006-01-02", local time unless a zone is given. Empty: the newest.
	At string
}

// file is one file of the source: its path under the folder, and its bytes.
type file struct {
	path string
	data []byte
}

// revision is the commit files were read at, for the report.
type revision struct {
	commit string
	when   time.Time
}

// maxFileBytes caps one file: a Kubernetes object is at most ~1.5 MiB in etcd; a larger file is
// not one the mirror wrote.
const maxFileBytes = 4 << 20

// read returns the .yaml and .yml files of the source, and the commit they were read at (none for
// a folder read from disk).
func (s Source) read(ctx context.Context) ([]file, *revision, error) {
	switch {
	case s.Repo != "" && s.Dir != "":
		return nil, nil, errors.New("give a folder or a repository, not both")
	case s.Repo != "":
		return s.readRepo(ctx)
	case s.Dir == "":
		return nil, nil, errors.New("give a folder (--from) or a repository (--repo)")
	case s.At == "":
		files, err := readDir(s.Dir)
		return files, nil, err
	}
	top, err := git(ctx, s.Dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, nil, fmt.Errorf("--at needs the folder's Git history: %w", err)
	}
	prefix, err := git(ctx, s.Dir, "rev-parse", "--show-prefix")
	if err != nil {
		return nil, nil, err
	}
	return readAt(ctx, strings.TrimSpace(string(top)), "HEAD", s.At, strings.TrimSpace(string(prefix)))
}

// readRepo clones the repository (bare, one branch, its whole history: At may go back) into a
// temporary folder, removed afterwards, and reads the folder at At.
func (s Source) readRepo(ctx context.Context) ([]file, *revision, error) {
	tmp, err := os.MkdirTemp("", "gitops-reverser-restore-")
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	args := []string{"clone", "--quiet", "--bare", "--single-branch"}
	if s.Branch != "" {
		args = append(args, "--branch", s.Branch)
	}
	if _, err := git(ctx, "", append(args, "--", s.Repo, tmp)...); err != nil {
		return nil, nil, fmt.Errorf("clone %s: %w", s.Repo, err)
	}
	return readAt(ctx, tmp, "HEAD", s.At, s.Path)
}

// readAt reads the files under folder (a path in the repository) at the commit at names, or at
// the newest commit of tip that is not after the time at names.
func readAt(ctx context.Context, repo, tip, at, folder string) ([]file, *revision, error) {
	commit, err := resolve(ctx, repo, tip, at)
	if err != nil {
		return nil, nil, err
	}
	out, err := git(ctx, repo, "show", "-s", "--format=%H %ct", commit)
	if err != nil {
		return nil, nil, err
	}
	hash, unix, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	secs, _ := strconv.ParseInt(unix, 10, 64)
	folder = strings.Trim(path.Clean("/"+folder), "/")
	args := []string{"archive", "--format=tar", hash}
	if folder != "" {
		args = append(args, "--", folder)
	}
	archive, err := git(ctx, repo, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("read %q at %.12s: %w", folder, hash, err)
	}
	files, err := untar(archive, folder)
	return files, &revision{commit: hash, when: time.Unix(secs, 0)}, err
}

// resolve names the commit at stands for: a revision git knows, else the newest commit of tip
// made at or before the time at reads as.
func resolve(ctx context.Context, repo, tip, at string) (string, error) {
	if at == "" {
		at = tip
	}
	if out, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", "--end-of-options", at+"^{commit}"); err == nil {
		return strings.TrimSpace(string(out)), nil
	}
	when, err := parseTime(at)
	if err != nil {
		return "", fmt.Errorf("--at %q is neither a commit of the repository nor a time (%w)", at, err)
	}
	out, err := git(ctx, repo, "rev-list", "-1", "--first-parent", "--before="+strconv.FormatInt(when.Unix(), 10), tip)
	if err != nil {
		return "", err
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return "", fmt.Errorf("no commit at or before %s: the history starts later", when.Format(time.RFC3339))
	}
	return strings.TrimSpace(string(out)), nil
}

// timeLayouts are the times --at reads, the local zone unless the time names one.
var timeLayouts = []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}

func parseTime(s string) (time.Time, error) {
	for _, layout := range timeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("a time is RFC 3339, \"2006-01-02 15:04\" or \"2006-01-02\"")
}

// git runs git in dir (empty: the current folder) and returns its output; its error output is
// in the error.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, errors.New("git is not installed: reading a repository needs it")
		}
		return nil, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// untar returns the YAML files of a tar archive, their paths made relative to folder.
func untar(archive []byte, folder string) ([]file, error) {
	var files []file
	r := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := r.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the archive git made: %w", err)
		}
		if h.Typeflag != tar.TypeReg || !isYAML(h.Name) {
			continue
		}
		if h.Size > maxFileBytes {
			return nil, fmt.Errorf("%s: %d bytes, more than a Kubernetes object can hold", h.Name, h.Size)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, folder), "/")
		files = append(files, file{path: name, data: data})
	}
}

// readDir returns the YAML files under dir, read from disk; symbolic links are not followed.
func readDir(dir string) ([]file, error) {
	var files []file
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || !isYAML(p) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > maxFileBytes {
			return fmt.Errorf("%s: %d bytes, more than a Kubernetes object can hold", p, info.Size())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, file{path: filepath.ToSlash(rel), data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	return files, nil
}

func isYAML(name string) bool {
	ext := path.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}
