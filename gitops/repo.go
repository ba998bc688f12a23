package gitops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// objectCacheBytes bounds go-git's cache of decoded objects (delta bases, trees, commits).
const objectCacheBytes = 4 * cache.MiByte

// repo is the bare clone of one branch: the remote-tracking ref refs/remotes/origin/{branch}
// is the last tip we fetched or pushed.
type repo struct {
	dir      string
	url      string
	auth     transport.AuthMethod
	branch   plumbing.ReferenceName // refs/heads/{branch} on the remote
	tracking plumbing.ReferenceName // refs/remotes/origin/{branch} in the clone
	// head and headTracking name the head branch of a pull request (Remote.Head) on the remote
	// and in the clone; empty when the worker pushes to branch itself.
	head, headTracking plumbing.ReferenceName
	sto                *filesystem.Storage
	remote             *git.Remote
	tail               *tail   // the pack the next push extends; nil: a new one
	located            locator // where the clone holds the blobs the next changes read
	// keep is the commits of history a first fetch brings (see KeptCommits); fresh says the
	// clone was just created and has not fetched yet.
	keep  int
	fresh bool
}

// openRepo opens the bare clone in dir when it is valid, and otherwise removes it and creates
// an empty one (filled by the first fetch). It never touches the network.
func openRepo(dir string, r Remote, keep int, log *slog.Logger) (*repo, error) {
	removeStale(dir)
	rp := &repo{
		dir:      dir,
		keep:     keep,
		url:      r.URL,
		auth:     r.Auth,
		branch:   plumbing.NewBranchReferenceName(r.Branch),
		tracking: plumbing.NewRemoteReferenceName("origin", r.Branch),
	}
	if r.Head != "" {
		rp.head, rp.headTracking = plumbing.NewBranchReferenceName(r.Head), plumbing.NewRemoteReferenceName("origin", r.Head)
	}
	if _, err := os.Stat(dir); err == nil {
		err := rp.open()
		if err == nil {
			return rp, nil
		}
		log.Warn("git clone unusable, recreating it", "dir", dir, "err", err)
		rp.close()
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove broken clone %s: %w", dir, err)
		}
	}
	if err := rp.init(); err != nil {
		rp.close()
		return nil, err
	}
	return rp, nil
}

func (r *repo) storage() *filesystem.Storage {
	return filesystem.NewStorageWithOptions(osfs.New(r.dir), cache.NewObjectLRU(objectCacheBytes),
		filesystem.Options{ExclusiveAccess: true, MaxOpenDescriptors: 16})
}

func (r *repo) remoteConfig() *config.RemoteConfig {
	spec := config.RefSpec("+" + r.branch.String() + ":" + r.tracking.String())
	return &config.RemoteConfig{Name: "origin", URLs: []string{r.url}, Fetch: []config.RefSpec{spec}}
}

// open opens an existing clone and checks that its tip commit and root tree are readable.
func (r *repo) open() error {
	r.sto = r.storage()
	if _, err := git.Open(r.sto, nil); err != nil {
		return fmt.Errorf("open clone: %w", err)
	}
	r.remote = git.NewRemote(r.sto, r.remoteConfig())
	tip, err := r.tip()
	if err != nil {
		return err
	}
	s := newStore(r.sto)
	tree, err := s.commitTree(tip)
	if err == nil && !tree.IsZero() {
		_, err = s.tree(tree)
	}
	if err != nil {
		return fmt.Errorf("check clone tip %s: %w", tip, err)
	}
	return nil
}

// init creates an empty bare clone.
func (r *repo) init() error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("create clone dir: %w", err)
	}
	r.sto = r.storage()
	gr, err := git.Init(r.sto, nil)
	if err != nil {
		return fmt.Errorf("init clone: %w", err)
	}
	if _, err := gr.CreateRemote(r.remoteConfig()); err != nil {
		return fmt.Errorf("init clone: %w", err)
	}
	r.remote = git.NewRemote(r.sto, r.remoteConfig())
	r.fresh = true
	return nil
}

// depth is how deep the next fetch reaches: the commits the clone keeps for its first, all that
// is new (0) after.
func (r *repo) depth() int {
	if r.fresh {
		return r.keep
	}
	return 0
}

// setAuth replaces the credentials of later fetches.
func (r *repo) setAuth(auth transport.AuthMethod) { r.auth = auth }

// tip is the last known remote tip, zero when the branch does not exist (yet).
func (r *repo) tip() (plumbing.Hash, error) { return r.ref(r.tracking) }

// ref is the hash a reference of the clone holds, zero when there is none.
func (r *repo) ref(name plumbing.ReferenceName) (plumbing.Hash, error) {
	ref, err := r.sto.Reference(name)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s: %w", name, err)
	}
	return ref.Hash(), nil
}

// setTip records a tip the remote accepted.
func (r *repo) setTip(h plumbing.Hash) error { return r.setRef(r.tracking, h) }

// setRef points a reference of the clone at h, or removes it when h is zero.
func (r *repo) setRef(name plumbing.ReferenceName, h plumbing.Hash) error {
	var err error
	if h.IsZero() {
		err = r.sto.RemoveReference(name)
	} else {
		err = r.sto.SetReference(plumbing.NewHashReference(name, h))
	}
	if err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	return nil
}

// fetch brings the one branch up to date and returns its tip (zero when the remote has no
// such branch).
func (r *repo) fetch(ctx context.Context) (plumbing.Hash, error) {
	err := r.remote.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   r.remoteConfig().Fetch,
		Auth:       r.auth,
		Tags:       git.NoTags,
		Depth:      r.depth(),
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		r.fresh = false
		return r.tip()
	case errors.Is(err, transport.ErrEmptyRemoteRepository), errors.Is(err, git.NoMatchingRefSpecError{}):
		if err := r.sto.RemoveReference(r.tracking); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("forget %s: %w", r.tracking, err)
		}
		return plumbing.ZeroHash, nil
	default:
		return plumbing.ZeroHash, fmt.Errorf("fetch %s: %w", r.branch, err)
	}
}

func (r *repo) close() {
	r.located.reset()
	if r.sto != nil {
		_ = r.sto.Close()
	}
}

// packDir is the folder of the clone's packs.
func (r *repo) packDir() string { return filepath.Join(r.dir, "objects", "pack") }

// newStore is a store of the clone that reads the blobs keepPushed located itself.
func (r *repo) newStore() *store {
	s := newStore(r.sto)
	s.located = &r.located
	return s
}

// fetchRefs brings the target branch and the head branch of a pull request (if any) up to date
// and returns their tips (zero for one the remote does not have). It lists the remote's
// references first and fetches only what the clone lacks: a head branch may not exist, which a
// fetch of it would refuse, and when nothing moved the listing is the only request.
func (r *repo) fetchRefs(ctx context.Context) (target, head plumbing.Hash, err error) {
	refs, err := r.remote.ListContext(ctx, &git.ListOptions{Auth: r.auth})
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, plumbing.ZeroHash, fmt.Errorf("list %s: %w", r.url, err)
	}
	advertised := map[plumbing.ReferenceName]plumbing.Hash{}
	for _, ref := range refs {
		advertised[ref.Name()] = ref.Hash()
	}
	var specs []config.RefSpec
	for _, pair := range [2][2]plumbing.ReferenceName{{r.branch, r.tracking}, {r.head, r.headTracking}} {
		if pair[0] == "" {
			continue
		}
		h := advertised[pair[0]]
		if _, err := r.sto.EncodedObjectSize(h); h.IsZero() || err == nil {
			if err := r.setRef(pair[1], h); err != nil {
				return plumbing.ZeroHash, plumbing.ZeroHash, err
			}
			continue
		}
		specs = append(specs, config.RefSpec("+"+pair[0].String()+":"+pair[1].String()))
	}
	if len(specs) > 0 {
		err := r.remote.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: specs, Auth: r.auth, Tags: git.NoTags, Depth: r.depth()})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return plumbing.ZeroHash, plumbing.ZeroHash, fmt.Errorf("fetch %s: %w", r.url, err)
		}
	}
	r.fresh = false
	if target, err = r.ref(r.tracking); err == nil && r.head != "" {
		head, err = r.ref(r.headTracking)
	}
	return target, head, err
}
