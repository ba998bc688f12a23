package gitstore

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

// Repo is the bare clone of one branch: the remote-tracking ref refs/remotes/origin/{branch} is
// the last tip fetched or pushed (Tip), refs/remotes/origin/{head} that of the head branch
// (HeadTip). It is owned by one goroutine.
type Repo struct {
	dir      string
	remote   Remote                 // Auth: the newest credentials
	branch   plumbing.ReferenceName // refs/heads/{branch} on the remote
	tracking plumbing.ReferenceName // refs/remotes/origin/{branch} in the clone
	// head and headTracking name the head branch of a pull request (Remote.Head) on the remote
	// and in the clone; empty when the clone follows branch alone.
	head, headTracking plumbing.ReferenceName
	sto                *filesystem.Storage
	origin             *git.Remote
	store              Store   // of the clone as it is open now
	tail               *tail   // the pack the next push extends; nil: a new one
	located            locator // where the clone holds the blobs the next changes read
	// keep is the commits of history a first fetch brings (see KeptCommits); fresh says the
	// clone was just created and has not fetched yet.
	keep  int
	fresh bool
	log   *slog.Logger
}

// Remote is the repository and branch a clone follows: Branch, and with it Head when set (the
// head branch of a pull request, which the clone fetches beside Branch).
type Remote struct {
	URL, Branch, Head string
	Auth              transport.AuthMethod // nil = none
}

// Open opens the bare clone in dir when it is valid, and otherwise removes it and creates an
// empty one (filled by the first fetch, which brings the newest keep commits: see KeptCommits).
// It never touches the network.
func Open(dir string, r Remote, keep int, log *slog.Logger) (*Repo, error) {
	removeStale(dir)
	rp := &Repo{
		dir:      dir,
		keep:     keep,
		remote:   r,
		branch:   plumbing.NewBranchReferenceName(r.Branch),
		tracking: plumbing.NewRemoteReferenceName("origin", r.Branch),
		log:      log,
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
		rp.Close()
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove broken clone %s: %w", dir, err)
		}
	}
	if err := rp.init(); err != nil {
		rp.Close()
		return nil, err
	}
	return rp, nil
}

// objectCacheBytes bounds go-git's cache of decoded objects (delta bases, trees, commits). The
// Store keeps what the next commits read (trees, the blobs a change deltas against) itself, so
// the cache is a small one: at 4 MiB it held 2 MiB of blobs at 2,000 objects, 3 MiB of peak RSS,
// for no speed (BenchmarkMirror2000, the same figures at 1 MiB).
const objectCacheBytes = 1 * cache.MiByte

func (r *Repo) storage() *filesystem.Storage {
	return filesystem.NewStorageWithOptions(osfs.New(r.dir), cache.NewObjectLRU(objectCacheBytes),
		filesystem.Options{ExclusiveAccess: true, MaxOpenDescriptors: 16})
}

func (r *Repo) remoteConfig() *config.RemoteConfig {
	spec := config.RefSpec("+" + r.branch.String() + ":" + r.tracking.String())
	return &config.RemoteConfig{Name: "origin", URLs: []string{r.remote.URL}, Fetch: []config.RefSpec{spec}}
}

// open opens an existing clone and checks that its tip commit and root tree are readable; then
// the Store is one of it.
func (r *Repo) open() error {
	r.sto = r.storage()
	if _, err := git.Open(r.sto, nil); err != nil {
		return fmt.Errorf("open clone: %w", err)
	}
	r.origin = git.NewRemote(r.sto, r.remoteConfig())
	tip, err := r.Tip()
	if err != nil {
		return err
	}
	s := newStore(r.sto, nil)
	tree, err := s.CommitTree(tip)
	if err == nil && !tree.IsZero() {
		_, err = s.tree(tree)
	}
	if err != nil {
		return fmt.Errorf("check clone tip %s: %w", tip, err)
	}
	r.resetStore()
	return nil
}

// init creates an empty bare clone.
func (r *Repo) init() error {
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
	r.origin = git.NewRemote(r.sto, r.remoteConfig())
	r.fresh = true
	r.resetStore()
	return nil
}

// resetStore makes the Store one of the clone as it is open now, which reads the blobs KeepPushed
// located itself. Store keeps returning the same *Store.
func (r *Repo) resetStore() { r.store = *newStore(r.sto, &r.located) }

// Store is the store of the clone: the same for the life of the Repo, made anew when the clone
// is (Swap).
func (r *Repo) Store() *Store { return &r.store }

// depth is how deep the next fetch reaches: the commits the clone keeps for its first, all that
// is new (0) after.
func (r *Repo) depth() int {
	if r.fresh {
		return r.keep
	}
	return 0
}

// SetAuth replaces the credentials of later fetches (and of the fetch of a renewal).
func (r *Repo) SetAuth(auth transport.AuthMethod) { r.remote.Auth = auth }

// Tip is the last known remote tip of the branch, zero when the branch does not exist (yet).
func (r *Repo) Tip() (plumbing.Hash, error) { return r.ref(r.tracking) }

// HeadTip is the last known remote tip of the head branch, zero when it does not exist (yet) or
// the clone follows no head branch.
func (r *Repo) HeadTip() (plumbing.Hash, error) { return r.ref(r.headTracking) }

// ref is the hash a reference of the clone holds, zero when there is none.
func (r *Repo) ref(name plumbing.ReferenceName) (plumbing.Hash, error) {
	ref, err := r.sto.Reference(name)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s: %w", name, err)
	}
	return ref.Hash(), nil
}

// SetTip records a tip of the branch the remote accepted.
func (r *Repo) SetTip(h plumbing.Hash) error { return r.setRef(r.tracking, h) }

// SetHeadTip records a tip of the head branch the remote accepted (zero: it deleted it).
func (r *Repo) SetHeadTip(h plumbing.Hash) error { return r.setRef(r.headTracking, h) }

// setRef points a reference of the clone at h, or removes it when h is zero.
func (r *Repo) setRef(name plumbing.ReferenceName, h plumbing.Hash) error {
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

// Fetch brings the one branch up to date and returns its tip (zero when the remote has no such
// branch).
func (r *Repo) Fetch(ctx context.Context) (plumbing.Hash, error) {
	err := r.origin.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   r.remoteConfig().Fetch,
		Auth:       r.remote.Auth,
		Tags:       git.NoTags,
		Depth:      r.depth(),
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		r.fresh = false
		return r.Tip()
	case errors.Is(err, transport.ErrEmptyRemoteRepository), errors.Is(err, git.NoMatchingRefSpecError{}):
		if err := r.sto.RemoveReference(r.tracking); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("forget %s: %w", r.tracking, err)
		}
		return plumbing.ZeroHash, nil
	default:
		return plumbing.ZeroHash, fmt.Errorf("fetch %s: %w", r.branch, err)
	}
}

// Close closes the clone's files.
func (r *Repo) Close() {
	r.located.reset()
	if r.sto != nil {
		_ = r.sto.Close()
	}
}

// packDir is the folder of the clone's packs.
func (r *Repo) packDir() string { return filepath.Join(r.dir, "objects", "pack") }

// FetchRefs brings the target branch and the head branch of a pull request (if any) up to date
// and returns their tips (zero for one the remote does not have). It lists the remote's
// references first and fetches only what the clone lacks: a head branch may not exist, which a
// fetch of it would refuse, and when nothing moved the listing is the only request.
func (r *Repo) FetchRefs(ctx context.Context) (target, head plumbing.Hash, err error) {
	refs, err := r.origin.ListContext(ctx, &git.ListOptions{Auth: r.remote.Auth})
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, plumbing.ZeroHash, fmt.Errorf("list %s: %w", r.remote.URL, err)
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
		err := r.origin.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: specs, Auth: r.remote.Auth, Tags: git.NoTags, Depth: r.depth()})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return plumbing.ZeroHash, plumbing.ZeroHash, fmt.Errorf("fetch %s: %w", r.remote.URL, err)
		}
	}
	r.fresh = false
	if target, err = r.ref(r.tracking); err == nil && r.head != "" {
		head, err = r.ref(r.headTracking)
	}
	return target, head, err
}
