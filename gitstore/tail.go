package gitstore

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// The trees a mirror writes again and again (a busy folder's, and those above it) would add
// their whole encoding to the clone at every push, though each differs from its previous version
// in a few entries. A pack on disk may not refer outside itself, so they go into the clone's
// tail: one pack that each push writes again, its objects copied as they are and the new trees
// appended as deltas against their previous versions in it. The cost of a push is a copy of the
// tail, bounded by tailMaxBytes, and its growth is the deltas. A tree whose previous version is
// elsewhere, or whose chain of deltas is maxDepth long, starts a chain whole.
//
// A tail grown past tailMaxBytes is sealed: it stays, as any pack, and a new tail starts. The
// tail and sealed tails are marked with a .keep file, as git marks packs not to repack: merging
// packs (Compact) copies whole objects and would expand their deltas.

// tailMaxBytes bounds the tail, and so the copy each push makes of it.
const tailMaxBytes = 16 << 20

// maxDepth bounds a chain of deltas, and so the deltas applied to read its newest tree when no
// cache has it (after a restart): each a copy of the tree, 6 MB for a folder of 100,000 files.
// A chain this long starts again whole, which adds a whole tree per maxDepth commits (at 100,000
// files about 16 KiB a commit; git, by default, chains 50).
const maxDepth = 250

// tail is the pack the clone's next push extends.
type tail struct {
	name    plumbing.Hash
	size    int64           // of the pack file
	entries []idxfile.Entry // every object, in the order written
	objects map[plumbing.Hash]tailObject
}

// tailObject is where a tail holds an object, and how many deltas read it.
type tailObject struct {
	offset int64
	depth  int
}

// KeepPushed puts the objects of a push the remote accepted, whose pack the Store made, into
// the clone: its trees go to the tail, the rest (blobs and commits) to a pack of their own,
// copied from the pack sent when it went whole there (a blob sent as a delta is compressed
// again, whole). The storage takes in both, and forgets the tail they replace, at once.
func (r *Repo) KeepPushed(pack Pack) error {
	s := &r.store
	var trees, rest []int // indexes into s.order and the pack's entries
	for i, h := range s.order {
		if s.overlay[h].typ == plumbing.TreeObject {
			trees = append(trees, i)
		} else {
			rest = append(rest, i)
		}
	}
	var placed []placedPack
	if len(rest) > 0 {
		type hotBlob struct {
			h      plumbing.Hash
			offset int64
		}
		var hot []hotBlob // where the pack holds the hot blobs, for the locator
		p, err := r.placePack(func(w io.Writer) (plumbing.Hash, *idxfile.Writer, error) {
			p, err := newPackWriter(w, len(rest))
			for _, i := range rest {
				if err != nil {
					break
				}
				h := s.order[i]
				if s.overlay[h].hot {
					hot = append(hot, hotBlob{h, p.n})
				}
				if raw, crc, whole := pack.entry(i); whole {
					err = p.addRaw(h, raw, crc)
				} else { // a blob sent as a delta: its base is in another pack
					err = p.add(h, s.overlay[h].typ, s.overlay[h].data)
				}
			}
			if err != nil {
				return plumbing.ZeroHash, nil, err
			}
			name, err := p.close()
			return name, p.idx, err
		})
		if err != nil {
			return fmt.Errorf("keep pushed objects in the clone: %w", err)
		}
		placed = append(placed, p)
		path := packPath(r.packDir(), p.name, ".pack")
		for _, b := range hot {
			r.located.locate(b.h, path, b.offset)
		}
	}
	tail, err := r.extendTail(s, pack, trees)
	if err != nil {
		return fmt.Errorf("keep pushed trees in the clone: %w", err)
	}
	return r.adopt(append(placed, tail...)...)
}

// extendTail writes the tail again with the trees of a push appended (indexes into s.order and
// the pack's entries), sealing it first when it is full. It returns the packs for the storage to
// adopt: the new tail, and the one it replaces with an empty index, which no lookup finds
// anything in (the storage has no other way to forget a pack than reading every index again, at
// the cost of the whole clone).
func (r *Repo) extendTail(s *Store, pack Pack, trees []int) ([]placedPack, error) {
	dir := r.packDir()
	old := r.tail
	if old != nil && old.size > tailMaxBytes {
		old = nil // sealed: its .keep stays
	}
	next := &tail{objects: map[plumbing.Hash]tailObject{}}
	if old != nil {
		next.entries = append(next.entries, old.entries...)
		maps.Copy(next.objects, old.objects)
		trees = slices.DeleteFunc(slices.Clone(trees), func(i int) bool { _, in := old.objects[s.order[i]]; return in })
	}
	if len(trees) == 0 {
		return nil, nil
	}
	placed, err := r.placePack(func(w io.Writer) (plumbing.Hash, *idxfile.Writer, error) {
		p, err := newPackWriter(w, len(next.entries)+len(trees))
		if err != nil {
			return plumbing.ZeroHash, nil, err
		}
		if old != nil {
			if err := copyPackBody(p, packPath(dir, old.name, ".pack"), old.size); err != nil {
				return plumbing.ZeroHash, nil, err
			}
			for _, e := range old.entries {
				p.idx.Add(e.Hash, e.Offset, e.CRC32)
			}
		}
		for _, i := range trees {
			h, at := s.order[i], p.n
			depth, err := next.add(p, h, s.overlay[h], pack, i)
			if err != nil {
				return plumbing.ZeroHash, nil, err
			}
			next.objects[h] = tailObject{offset: at, depth: depth}
			next.entries = append(next.entries, idxfile.Entry{Hash: h, Offset: uint64(at), CRC32: p.crc.Sum32()})
		}
		name, err := p.close()
		next.name, next.size = name, p.n+int64(len(name))
		return name, p.idx, err
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(packPath(dir, next.name, ".keep"), nil, 0o444); err != nil {
		return nil, err
	}
	r.tail = next
	if old == nil {
		return []placedPack{placed}, nil
	}
	if err := r.sto.DeleteOldObjectPackAndIndex(old.name, time.Time{}); err != nil {
		return nil, err
	}
	_ = os.Remove(packPath(dir, old.name, ".keep"))
	empty := new(idxfile.Writer)
	_ = empty.OnHeader(0)
	err = empty.OnFooter(old.name)
	return []placedPack{placed, {name: old.name, idx: empty}}, err
}

// add appends tree h (o, the i-th object of pack) to p: as a delta against its previous version
// when the tail holds that within maxDepth, else whole, as the pack sent it when it went whole.
// It returns the tree's depth.
func (t *tail) add(p *packWriter, h plumbing.Hash, o rawObject, pack Pack, i int) (int, error) {
	if b, ok := t.objects[o.base]; ok && o.delta != nil && b.depth < maxDepth {
		return b.depth + 1, p.addOfsDelta(h, p.n-b.offset, o.delta)
	}
	if raw, crc, whole := pack.entry(i); whole {
		return 0, p.addRaw(h, raw, crc)
	}
	return 0, p.add(h, o.typ, o.data)
}

// packHeaderSize is the length of a pack's header: "PACK", version, count.
const packHeaderSize = 12

// copyPackBody appends to p the objects of the pack at path, size bytes long: everything
// between its header and its trailer, as it is. Offsets stay what they were, for both have
// 12-byte headers, and so do the distances of its deltas.
func copyPackBody(p *packWriter, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("copy the clone's tail: %w", err)
	}
	defer func() { _ = f.Close() }()
	body := io.NewSectionReader(f, packHeaderSize, size-packHeaderSize-int64(len(plumbing.ZeroHash)))
	if _, err := bufio.NewReaderSize(body, 64<<10).WriteTo(p); err != nil {
		return fmt.Errorf("copy the clone's tail: %w", err)
	}
	return nil
}
