package gitstore

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"unsafe"

	"github.com/go-git/go-git/v5/plumbing"
)

// Modes as Git writes them in tree entries.
const (
	dirMode  = "40000"
	fileMode = "100644"
)

// TreeEntry is one entry of a tree. Name and Mode point into the tree's immutable encoding, so
// parsing a tree allocates one slice and no strings.
type TreeEntry struct {
	Name, Mode string
	Hash       plumbing.Hash
}

// IsDir reports whether the entry is a subtree.
func (e *TreeEntry) IsDir() bool { return e.Mode == dirMode }

// treeEntrySize approximates the memory of one parsed entry, for the tree cache.
const treeEntrySize = int(unsafe.Sizeof(TreeEntry{}))

var errMalformedTree = errors.New("malformed tree")

// parseTree decodes a tree; the entries alias data, which must never change afterwards.
func parseTree(data []byte) ([]TreeEntry, error) {
	n := 0
	for i := 0; i < len(data); {
		z := bytes.IndexByte(data[i:], 0)
		if z < 0 || i+z+21 > len(data) {
			return nil, errMalformedTree
		}
		i += z + 21
		n++
	}
	entries := make([]TreeEntry, 0, n)
	for i := 0; i < len(data); {
		sp := bytes.IndexByte(data[i:], ' ')
		z := bytes.IndexByte(data[i:], 0)
		if sp < 1 || sp > z {
			return nil, errMalformedTree
		}
		e := TreeEntry{Mode: bytesString(data[i : i+sp]), Name: bytesString(data[i+sp+1 : i+z])}
		copy(e.Hash[:], data[i+z+1:i+z+21])
		entries = append(entries, e)
		i += z + 21
	}
	return entries, nil
}

// encodeTree encodes entries, which must already be in Git order.
func encodeTree(entries []TreeEntry) []byte {
	size := 0
	for i := range entries {
		size += len(entries[i].Mode) + len(entries[i].Name) + 22
	}
	out := make([]byte, 0, size)
	for i := range entries {
		out = append(out, entries[i].Mode...)
		out = append(out, ' ')
		out = append(out, entries[i].Name...)
		out = append(out, 0)
		out = append(out, entries[i].Hash[:]...)
	}
	return out
}

// compareKey orders a tree entry against a key the way Git sorts trees: a directory compares
// as its name followed by "/". key is a file name, or a directory name followed by "/".
func compareKey(name string, dir bool, key string) int {
	m := min(len(name), len(key))
	if c := strings.Compare(name[:m], key[:m]); c != 0 {
		return c
	}
	switch {
	case len(name) > len(key):
		return 1
	case len(name) == len(key):
		if dir {
			return 1
		}
		return 0
	case !dir:
		return -1
	case key[len(name)] != '/':
		if key[len(name)] > '/' {
			return -1
		}
		return 1
	case len(key) == len(name)+1:
		return 0
	default:
		return -1
	}
}

// Op is one file change of a tree: write Blob at Path, or delete Path when Blob is zero.
type Op struct {
	Path string
	Blob plumbing.Hash
	// Data is the blob's content, nil for a blob the clone and the remote already have.
	Data []byte
	// Keep, when set, is asked about the blob the tree holds at Path when it is not Blob: true
	// keeps it, as it already says the same.
	Keep func(current []byte) bool
	// Effect is what the op did to the tree, set by UpdateTree.
	Effect Effect
}

// Effect records what an Op did to the tree.
type Effect uint8

// The effects of an Op: none (the tree held Blob already, Keep kept what it held, or there was
// no file to delete), the file written, the file deleted.
const (
	Unchanged Effect = iota
	Written
	Deleted
)

// UpdateTree applies ops (sorted by path, one per path) to the tree root and returns the new
// root, setting each op's Effect. Only the trees along changed paths are rewritten; every other
// subtree is reused by hash. An op that changes nothing (same blob, or deleting a missing file)
// is skipped.
func (s *Store) UpdateTree(root plumbing.Hash, ops []Op) (plumbing.Hash, error) {
	h, err := s.updateDir(root, ops, 0)
	if err != nil || !h.IsZero() {
		return h, err
	}
	return s.put(plumbing.TreeObject, []byte{}), nil // the empty root tree
}

// updateDir applies ops whose paths, from byte off on, are relative to the directory tree. It
// returns the zero hash when the directory ends up empty, so the caller drops it.
func (s *Store) updateDir(tree plumbing.Hash, ops []Op, off int) (plumbing.Hash, error) {
	var entries []TreeEntry
	if !tree.IsZero() {
		var err error
		if entries, err = s.tree(tree); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	out := make([]TreeEntry, 0, len(entries)+len(ops))
	changed, i := false, 0
	for k := 0; k < len(ops); {
		rel := ops[k].Path[off:]
		key, dir := rel, false
		if slash := strings.IndexByte(rel, '/'); slash >= 0 {
			key, dir = rel[:slash+1], true
		}
		for i < len(entries) && compareKey(entries[i].Name, entries[i].IsDir(), key) < 0 {
			out = append(out, entries[i])
			i++
		}
		var cur *TreeEntry
		if i < len(entries) && compareKey(entries[i].Name, entries[i].IsDir(), key) == 0 {
			cur = &entries[i]
			i++
		}
		if dir {
			end := k + 1
			for end < len(ops) && strings.HasPrefix(ops[end].Path[off:], key) {
				end++
			}
			var sub bool
			var err error
			if out, sub, err = s.applySubdir(out, cur, ops[k:end], off, key); err != nil {
				return plumbing.ZeroHash, err
			}
			changed = changed || sub
			k = end
			continue
		}
		out = s.applyFileOp(out, cur, &ops[k], key)
		changed = changed || ops[k].Effect != Unchanged
		k++
	}
	if !changed {
		return tree, nil
	}
	// The commit replaces this tree, so its parsed entries leave the cache now instead of holding
	// memory until newer trees push them out: the next commits build on the new one (a rebuild
	// after a failed push reads it again from the clone).
	s.trees.drop(tree)
	out = append(out, entries[i:]...)
	if len(out) == 0 {
		return plumbing.ZeroHash, nil
	}
	data := encodeTree(out)
	return s.putDelta(plumbing.TreeObject, data, tree, treeDelta(entries, out, len(data))), nil
}

// applySubdir applies ops, all below the subdirectory key ("name/") whose entry is cur (nil when
// missing), appending its new entry to out unless it ended up empty; changed says whether it did
// change.
func (s *Store) applySubdir(out []TreeEntry, cur *TreeEntry, ops []Op, off int, key string) (_ []TreeEntry, changed bool, _ error) {
	var sub plumbing.Hash
	if cur != nil {
		sub = cur.Hash
	}
	h, err := s.updateDir(sub, ops, off+len(key))
	if err != nil {
		return out, false, err
	}
	if !h.IsZero() {
		out = append(out, TreeEntry{Name: key[:len(key)-1], Mode: dirMode, Hash: h})
	}
	return out, h != sub, nil
}

// applyFileOp applies o to the file entry cur (nil when missing) named name, appending the
// resulting entry to out and recording the op's effect.
func (s *Store) applyFileOp(out []TreeEntry, cur *TreeEntry, o *Op, name string) []TreeEntry {
	switch {
	case o.Blob.IsZero():
		if cur != nil {
			o.Effect = Deleted
		}
		return out
	case cur != nil && cur.Hash == o.Blob:
		return append(out, *cur)
	case cur != nil && o.Keep != nil && s.keeps(cur.Hash, o.Keep):
		return append(out, *cur)
	default:
		if o.Data != nil { // nil: a blob the remote has already (a replayed commit's)
			s.putBlob(o.Data, cur)
		}
		o.Effect = Written
		return append(out, TreeEntry{Name: name, Mode: fileMode, Hash: o.Blob})
	}
}

// putBlob adds a blob written over the file cur (nil: a new file) to the overlay, with a delta
// against cur's blob when that is less than half its size: an object's YAML changed in a few
// lines. The old blob is read where the push that wrote it put it (see located.go), else from
// the clone through go-git.
func (s *Store) putBlob(data []byte, cur *TreeEntry) {
	if cur == nil || len(data) < blobDeltaMinSize {
		s.put(plumbing.BlobObject, data)
		return
	}
	var delta []byte
	if old, err := s.Blob(cur.Hash); err == nil {
		delta = blobDelta(old, data)
	}
	s.located.forget(cur.Hash)
	h := s.putDelta(plumbing.BlobObject, data, cur.Hash, delta)
	o := s.overlay[h]
	o.hot = true
	s.overlay[h] = o
}

// blobDeltaMinSize is the smallest blob worth a delta: below it, the whole blob compressed is
// about as small.
const blobDeltaMinSize = 128

// keeps asks keep about the blob h; a blob that cannot be read is not kept, so it is rewritten.
func (s *Store) keeps(h plumbing.Hash, keep func([]byte) bool) bool {
	data, err := s.Blob(h)
	return err == nil && keep(data)
}

// Dir returns the entries of the directory at dir ("a/b", "" for the root) below the tree root,
// or nil when it does not exist.
func (s *Store) Dir(root plumbing.Hash, dir string) ([]TreeEntry, error) {
	if root.IsZero() {
		return nil, nil
	}
	entries, err := s.tree(root)
	for dir != "" && err == nil {
		name, rest, _ := strings.Cut(dir, "/")
		e := FindDir(entries, name)
		if e == nil {
			return nil, nil
		}
		entries, err = s.tree(e.Hash)
		dir = rest
	}
	return entries, err
}

// FindDir finds the subdirectory name in entries by binary search (entries are in Git order).
func FindDir(entries []TreeEntry, name string) *TreeEntry {
	key := name + "/"
	lo, hi := 0, len(entries)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if compareKey(entries[mid].Name, entries[mid].IsDir(), key) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(entries) && entries[lo].IsDir() && entries[lo].Name == name {
		return &entries[lo]
	}
	return nil
}

// FindFile finds the entry name that is not a directory in entries by binary search; nil when
// there is none.
func FindFile(entries []TreeEntry, name string) *TreeEntry {
	i, found := slices.BinarySearchFunc(entries, name, func(e TreeEntry, name string) int {
		return compareKey(e.Name, e.IsDir(), name)
	})
	if !found || entries[i].IsDir() {
		return nil
	}
	return &entries[i]
}

// WalkFiles calls fn with the path of every file below the directory entries, whose path
// (with a trailing "/", or empty for the root) is prefix. The path buffer is reused: fn must
// copy it to keep it.
func (s *Store) WalkFiles(entries []TreeEntry, prefix []byte, fn func(path []byte)) error {
	for i := range entries {
		p := append(prefix, entries[i].Name...)
		if !entries[i].IsDir() {
			fn(p)
			continue
		}
		sub, err := s.tree(entries[i].Hash)
		if err != nil {
			return err
		}
		if err := s.WalkFiles(sub, append(p, '/'), fn); err != nil {
			return err
		}
	}
	return nil
}

// DiffFiles calls fn with the path of every file that differs between trees a and b (zero:
// empty), and its entries on either side (nil where it is missing). Equal subtrees are skipped
// unread.
func (s *Store) DiffFiles(a, b plumbing.Hash, prefix string, fn func(path string, was, now *TreeEntry)) error {
	if a == b {
		return nil
	}
	var ea, eb []TreeEntry
	var err error
	if !a.IsZero() {
		if ea, err = s.tree(a); err != nil {
			return err
		}
	}
	if !b.IsZero() {
		if eb, err = s.tree(b); err != nil {
			return err
		}
	}
	side := func(e *TreeEntry, was bool) error { // an entry only one side has
		if !e.IsDir() {
			if was {
				fn(prefix+e.Name, e, nil)
			} else {
				fn(prefix+e.Name, nil, e)
			}
			return nil
		}
		if was {
			return s.DiffFiles(e.Hash, plumbing.ZeroHash, prefix+e.Name+"/", fn)
		}
		return s.DiffFiles(plumbing.ZeroHash, e.Hash, prefix+e.Name+"/", fn)
	}
	i, j := 0, 0
	for err == nil && (i < len(ea) || j < len(eb)) {
		switch c := entryOrder(ea, eb, i, j); {
		case c < 0:
			err = side(&ea[i], true)
			i++
		case c > 0:
			err = side(&eb[j], false)
			j++
		default:
			x, y := &ea[i], &eb[j]
			switch {
			case x.Hash == y.Hash && x.Mode == y.Mode:
			case x.IsDir():
				err = s.DiffFiles(x.Hash, y.Hash, prefix+x.Name+"/", fn)
			default:
				fn(prefix+x.Name, x, y)
			}
			i++
			j++
		}
	}
	return err
}

// entryOrder compares ea[i] and eb[j] in Git's tree order; a side that ran out sorts last.
func entryOrder(ea, eb []TreeEntry, i, j int) int {
	switch {
	case i == len(ea):
		return 1
	case j == len(eb):
		return -1
	}
	return compareKey(ea[i].Name, ea[i].IsDir(), entryKey(&eb[j]))
}

// entryKey is the key compareKey sorts an entry by: its name, with a trailing "/" for a tree.
func entryKey(e *TreeEntry) string {
	if e.IsDir() {
		return e.Name + "/"
	}
	return e.Name
}

// bytesString views b as a string without copying; b must never change afterwards.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
