package gitedits

import (
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/gitstore"
)

// gitlinkMode is the mode of a submodule entry, whose hash names a commit of another repository.
const gitlinkMode = "160000"

// symlinkMode is the mode of a symbolic link, whose blob is the path it points to.
const symlinkMode = "120000"

// has reports whether the clone (or the worker's unpushed commits) holds object h.
func has(r gitops.Reader, h plumbing.Hash) bool {
	_, err := r.Size(h)
	return err == nil
}

// commitTree returns the root tree of commit h.
func commitTree(r gitops.Reader, h plumbing.Hash) (plumbing.Hash, error) {
	data, err := r.Commit(h)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	n, err := parseCommit(data)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit %s: %w", h, err)
	}
	return n.tree, nil
}

// lookupFile returns the entry of the file at p below root, nil when there is none (or a
// directory is there).
func lookupFile(r gitops.Reader, root plumbing.Hash, p string) (*gitstore.TreeEntry, error) {
	dir, name := path.Split(p)
	entries, err := r.Dir(root, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil, err
	}
	return gitstore.FindFile(entries, name), nil
}

// cleanFolder checks a base folder and returns it without a leading or trailing "/", "" for
// the whole repository.
func cleanFolder(folder string) (string, error) {
	f := strings.TrimPrefix(path.Clean(strings.TrimPrefix(folder, "/")), "./")
	if f == "." {
		f = ""
	}
	if f != "" && !gitops.ValidPath(f) {
		return "", fmt.Errorf("edits: invalid folder %q", folder)
	}
	return f, nil
}

// parseHash parses a full hexadecimal SHA-1.
func parseHash(s string) (plumbing.Hash, bool) {
	if len(s) != 40 {
		return plumbing.ZeroHash, false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return plumbing.ZeroHash, false
		}
	}
	return plumbing.NewHash(s), true
}
