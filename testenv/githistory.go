package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// CommitChanges is one commit with the new content of every file it changed (nil: deleted).
type CommitChanges struct {
	SHA, AuthorName string
	Files           map[string][]byte
}

// History lists the commits of branch, newest first, each with the files it changed. It reads
// everything with two git processes, so it stays fast on long histories.
func (s *GitServer) History(repo, branch string) ([]CommitChanges, error) {
	dir, sha, err := s.tip(repo, branch)
	if err != nil || sha == "" {
		return nil, err
	}
	out, err := s.gitDir(dir, "log", "--format=commit %H %an", "--raw", "--no-abbrev", "--no-renames", sha)
	if err != nil {
		return nil, fmt.Errorf("log %s@%s: %w", repo, branch, err)
	}
	var commits []CommitChanges
	blobs := map[string][]string{} // blob hash → "commit index\x00path" references
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "commit "); ok {
			h, author, _ := strings.Cut(rest, " ")
			commits = append(commits, CommitChanges{SHA: h, AuthorName: author, Files: map[string][]byte{}})
			continue
		}
		// ":100644 100644 <old> <new> M\t<path>"
		meta, path, ok := strings.Cut(line, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 5 || len(commits) == 0 {
			continue
		}
		c := len(commits) - 1
		commits[c].Files[path] = nil
		if fields[4] != "D" {
			blobs[fields[3]] = append(blobs[fields[3]], strconv.Itoa(c)+"\x00"+path)
		}
	}
	contents, err := s.catBlobs(dir, blobs)
	if err != nil {
		return nil, err
	}
	for h, refs := range blobs {
		for _, ref := range refs {
			idx, path, _ := strings.Cut(ref, "\x00")
			c, _ := strconv.Atoi(idx)
			commits[c].Files[path] = contents[h]
		}
	}
	return commits, nil
}

// catBlobs reads many blobs through one `git cat-file --batch`.
func (s *GitServer) catBlobs(dir string, blobs map[string][]string) (map[string][]byte, error) {
	var in bytes.Buffer
	for h := range blobs {
		in.WriteString(h + "\n")
	}
	cmd := exec.CommandContext(context.Background(), s.gitPath, "cat-file", "--batch")
	cmd.Dir = dir
	cmd.Env = s.gitEnv()
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("cat-file: %w", err)
	}
	contents := map[string][]byte{}
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		header, err := r.ReadString('\n')
		if err != nil {
			break
		}
		// "<hash> blob <size>"
		f := strings.Fields(header)
		if len(f) != 3 {
			return nil, fmt.Errorf("cat-file: unexpected header %q", header)
		}
		size, _ := strconv.Atoi(f[2])
		body := make([]byte, size+1) // content and the trailing newline
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("cat-file: %w", err)
		}
		contents[f[0]] = body[:size]
	}
	return contents, nil
}
