package gitedits

import (
	"context"
	"errors"
	"fmt"

	"github.com/configbutler/gitops-reverser/gitops"
)

// Files reads several paths at commit (a full SHA) from the clone of the branch, in one visit
// to its worker, without fetching: for reading a file of an adopted folder together with the
// kustomizations that give its documents their namespace. A path the commit has no file at,
// or whose file is over gitops.MaxFileBytes, is left out of the result. The error wraps
// ErrUnknownRevision when the clone has no such commit.
func (b Branch) Files(ctx context.Context, commit string, paths []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(paths))
	err := b.Git.Read(ctx, b.URL, b.Name, func(r gitops.Reader) error {
		for _, p := range paths {
			data, err := readFile(r, commit, p)
			switch {
			case errors.Is(err, ErrNotFound), errors.Is(err, ErrTooLarge):
				continue
			case err != nil:
				return err
			}
			out[p] = data
		}
		return nil
	})
	if errors.Is(err, gitops.ErrNoWorker) {
		return nil, fmt.Errorf("read %d files at %s: %w", len(paths), commit, err)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
