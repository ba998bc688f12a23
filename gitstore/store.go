package gitstore

import (
	"container/list"
	"crypto/sha1" //nolint:gosec // Git object names are SHA-1
	"fmt"
	"io"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Store reads objects from the clone and keeps the objects of the commits being built in an
// in-memory overlay: they are exactly what the next push sends (Pack), and they reach the
// clone's disk as one pack once the remote accepted them (Repo.KeepPushed). A Repo has one
// Store, made anew in place when the clone is.
type Store struct {
	sto     *filesystem.Storage
	located *locator // where the clone holds hot blobs; nil: go-git finds them all
	overlay map[plumbing.Hash]rawObject
	order   []plumbing.Hash // overlay objects in creation order
	trees   *treeCache
	// shallow holds the commits at the boundary of a shallow clone, whose parents it lacks: they
	// read as having none, as in git.
	shallow map[plumbing.Hash]bool
	// newest is the newest commit that left the overlay and its tree, which the next commit
	// builds on: reading it from the clone would have go-git map every offset of its pack.
	newest struct{ commit, tree plumbing.Hash }
}

// rawObject is an object built in the Store and not yet persisted in the clone.
type rawObject struct {
	typ plumbing.ObjectType
	// hot marks a blob that is a new version of a file: the file's next change reads it. (Beside
	// typ, it takes no room of its own: the overlay holds an entry per object of a seed.)
	hot  bool
	data []byte
	// base is the object's previous version, which the remote and the clone have or the overlay
	// holds, and delta makes data from it; both zero when the object has no base worth a delta.
	base  plumbing.Hash
	delta []byte
}

// newStore is a store of the clone sto that reads the blobs located says where to find itself
// (nil: go-git finds them all).
func newStore(sto *filesystem.Storage, located *locator) *Store {
	s := &Store{sto: sto, located: located, overlay: map[plumbing.Hash]rawObject{}, trees: newTreeCache(treeCacheBytes)}
	s.readShallow()
	return s
}

// readShallow reads the boundary of a shallow clone again (after a deepen).
func (s *Store) readShallow() {
	s.shallow = nil
	if hs, err := s.sto.Shallow(); err == nil && len(hs) > 0 {
		s.shallow = make(map[plumbing.Hash]bool, len(hs))
		for _, h := range hs {
			s.shallow[h] = true
		}
	}
}

// treeCacheBytes bounds the parsed trees kept between batches: enough for a folder of 100,000
// files (about 10 MiB parsed) besides the smaller trees above it.
const treeCacheBytes = 32 << 20

// BlobHash is the Git object name of a file's content.
func BlobHash(data []byte) plumbing.Hash { return objectHash(plumbing.BlobObject, data) }

// objectHash is the Git object name of data with type typ.
func objectHash(typ plumbing.ObjectType, data []byte) plumbing.Hash {
	var hdr [32]byte
	b := append(hdr[:0], typ.Bytes()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(data)), 10)
	b = append(b, 0)
	h := sha1.New() //nolint:gosec // Git object names are SHA-1
	h.Write(b)
	h.Write(data)
	var out plumbing.Hash
	h.Sum(out[:0])
	return out
}

// PutCommit adds a new commit, encoded as Git encodes it, to the overlay and returns its name.
func (s *Store) PutCommit(data []byte) plumbing.Hash { return s.put(plumbing.CommitObject, data) }

// put adds a new object to the overlay and returns its name.
func (s *Store) put(typ plumbing.ObjectType, data []byte) plumbing.Hash {
	return s.putDelta(typ, data, plumbing.ZeroHash, nil)
}

// putDelta adds a new object that delta makes from base (none when delta is nil) to the overlay
// and returns its name.
func (s *Store) putDelta(typ plumbing.ObjectType, data []byte, base plumbing.Hash, delta []byte) plumbing.Hash {
	h := objectHash(typ, data)
	if h == base || delta == nil {
		base, delta = plumbing.ZeroHash, nil
	}
	if _, ok := s.overlay[h]; !ok {
		s.overlay[h] = rawObject{typ: typ, data: data, base: base, delta: delta}
		s.order = append(s.order, h)
	}
	return h
}

// DropOverlay forgets the objects of the commits built: they were pushed and are in the clone
// now, or will never be pushed (they are rebuilt on a new tip). The trees the newest commit added
// stay in the tree cache, parsed: the next commits build on that tip, and reading a large folder
// back from the clone costs inflating it every time.
func (s *Store) DropOverlay() {
	for i := len(s.order) - 1; i >= 0; i-- {
		if s.overlay[s.order[i]].typ == plumbing.CommitObject {
			if tree, err := s.CommitTree(s.order[i]); err == nil {
				s.cacheOverlayTrees(tree)
				s.newest.commit, s.newest.tree = s.order[i], tree
			}
			break
		}
	}
	clear(s.overlay)
	s.order = s.order[:0]
}

// cacheOverlayTrees puts tree h and the trees below it that are in the overlay into the tree
// cache.
func (s *Store) cacheOverlayTrees(h plumbing.Hash) {
	o, ok := s.overlay[h]
	if !ok || o.typ != plumbing.TreeObject {
		return
	}
	entries, err := parseTree(o.data)
	if err != nil {
		return
	}
	for i := range entries {
		if entries[i].IsDir() {
			s.cacheOverlayTrees(entries[i].Hash)
		}
	}
	s.trees.put(h, entries, len(o.data)+treeEntrySize*len(entries))
}

// tree returns the parsed entries of tree h.
func (s *Store) tree(h plumbing.Hash) ([]TreeEntry, error) {
	if entries, ok := s.trees.get(h); ok {
		return entries, nil
	}
	data, err := s.treeData(h)
	if err != nil {
		return nil, err
	}
	entries, err := parseTree(data)
	if err != nil {
		return nil, fmt.Errorf("parse tree %s: %w", h, err)
	}
	s.trees.put(h, entries, len(data)+treeEntrySize*len(entries))
	return entries, nil
}

// treeData is the encoding of tree h, from the overlay or the clone.
func (s *Store) treeData(h plumbing.Hash) ([]byte, error) {
	if o, ok := s.overlay[h]; ok {
		return o.data, nil
	}
	return s.read(plumbing.TreeObject, h)
}

// read returns the content of an object stored in the clone.
func (s *Store) read(typ plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	return readObject(s.sto, typ, h)
}

// readObject returns the content of an object stored in sto.
func readObject(sto *filesystem.Storage, typ plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	obj, err := sto.EncodedObject(typ, h)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", typ, h, err)
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", typ, h, err)
	}
	defer func() { _ = r.Close() }()
	data := make([]byte, obj.Size())
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("read %s %s: %w", typ, h, err)
	}
	return data, nil
}

// CommitTree returns the root tree of commit h (zero for the zero commit).
func (s *Store) CommitTree(h plumbing.Hash) (plumbing.Hash, error) {
	if h.IsZero() {
		return plumbing.ZeroHash, nil
	}
	if h == s.newest.commit {
		return s.newest.tree, nil
	}
	var data []byte
	if o, ok := s.overlay[h]; ok {
		data = o.data
	} else {
		var err error
		if data, err = s.read(plumbing.CommitObject, h); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	t, err := treeOf(data) // the first line: the rest of the commit is not read
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit %s: %w", h, err)
	}
	return t, nil
}

// Commit returns the encoding of commit h (its headers, a blank line, its message), from the
// overlay or the clone.
func (s *Store) Commit(h plumbing.Hash) ([]byte, error) {
	if o, ok := s.overlay[h]; ok {
		return o.data, nil
	}
	return s.read(plumbing.CommitObject, h)
}

// Shallow reports whether commit h is at the boundary of the history the clone keeps (see
// KeptCommits): its parents are not in the clone, and it reads as a root commit, as in git.
func (s *Store) Shallow(h plumbing.Hash) bool { return s.shallow[h] }

// Blob returns the content of blob h, from the overlay or the clone.
func (s *Store) Blob(h plumbing.Hash) ([]byte, error) {
	if o, ok := s.overlay[h]; ok {
		return o.data, nil
	}
	if data, ok := s.located.read(h); ok {
		return data, nil
	}
	return s.read(plumbing.BlobObject, h)
}

// size is the size of object h without reading it. (The storage's HasEncodedObject is not used:
// with exclusive access it misses objects that are packed.)
func (s *Store) size(h plumbing.Hash) (int64, error) {
	if o, ok := s.overlay[h]; ok {
		return int64(len(o.data)), nil
	}
	n, err := s.sto.EncodedObjectSize(h)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", h, err)
	}
	return n, nil
}

// treeCache is a small LRU of parsed trees, bounded by the bytes of their encoding.
type treeCache struct {
	max, size int
	ll        *list.List
	items     map[plumbing.Hash]*list.Element
}

type treeCacheItem struct {
	h       plumbing.Hash
	entries []TreeEntry
	size    int
}

func newTreeCache(max int) *treeCache {
	return &treeCache{max: max, ll: list.New(), items: map[plumbing.Hash]*list.Element{}}
}

func (c *treeCache) get(h plumbing.Hash) ([]TreeEntry, bool) {
	e, ok := c.items[h]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*treeCacheItem).entries, true
}

// drop forgets h, if cached.
func (c *treeCache) drop(h plumbing.Hash) {
	if e, ok := c.items[h]; ok {
		c.ll.Remove(e)
		delete(c.items, h)
		c.size -= e.Value.(*treeCacheItem).size
	}
}

func (c *treeCache) put(h plumbing.Hash, entries []TreeEntry, size int) {
	if _, ok := c.items[h]; ok || size > c.max {
		return
	}
	c.items[h] = c.ll.PushFront(&treeCacheItem{h: h, entries: entries, size: size})
	c.size += size
	for c.size > c.max {
		c.drop(c.ll.Back().Value.(*treeCacheItem).h)
	}
}
