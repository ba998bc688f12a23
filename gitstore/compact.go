package gitstore

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// maxPacks bounds the packs in a clone: every push and fetch adds one, and every object
// lookup may try each of them.
const maxPacks = 32

// Compact merges every pack but the largest (the clone's initial one, usually) and the kept
// ones (tails, see tail.go) into one, when the clone has more than maxPacks. The cost is the size
// of the small packs only, and mostly a copy: see mergePacks.
func (r *Repo) Compact() error {
	all, err := r.sto.ObjectPacks()
	if err != nil || len(all) <= maxPacks {
		return err
	}
	dir := r.packDir()
	// The storage hands out its own list: filter a copy.
	packs := slices.DeleteFunc(slices.Clone(all), func(h plumbing.Hash) bool {
		_, err := os.Stat(packPath(dir, h, ".keep"))
		return err == nil
	})
	if len(packs) < 2 {
		return nil
	}
	size := func(h plumbing.Hash) int64 {
		fi, err := os.Stat(packPath(dir, h, ".pack"))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	largest := slices.MaxFunc(packs, func(a, b plumbing.Hash) int { return cmp.Compare(size(a), size(b)) })
	var small []plumbing.Hash
	for _, h := range packs {
		if h != largest {
			small = append(small, h)
		}
	}
	if err := r.keepPack(func(w io.Writer) (plumbing.Hash, *idxfile.Writer, error) { return r.mergePacks(w, dir, small) }); err != nil {
		return err
	}
	for _, h := range small {
		if err := r.sto.DeleteOldObjectPackAndIndex(h, time.Time{}); err != nil {
			return fmt.Errorf("compact clone: delete pack %s: %w", h, err)
		}
	}
	r.sto.Reindex()
	return nil
}

func packPath(dir string, h plumbing.Hash, ext string) string {
	return filepath.Join(dir, "pack-"+h.String()+ext)
}

// mergePacks streams the objects of packs into one pack, each object once, and returns its name
// and index. A whole object is copied as it is packed, compressed bytes and CRC-32 included: its
// entry means the same in any pack. A delta (only a fetched pack has them) refers to its base by
// offset or within its own pack, so it is read whole through the storage and packed again.
func (r *Repo) mergePacks(w io.Writer, dir string, packs []plumbing.Hash) (plumbing.Hash, *idxfile.Writer, error) {
	indexes := make([][]idxfile.Entry, len(packs))
	written := map[plumbing.Hash]bool{} // every object to merge, and whether it is in the new pack
	for i, h := range packs {
		entries, err := readPackIndex(packPath(dir, h, ".idx"))
		if err != nil {
			return plumbing.ZeroHash, nil, err
		}
		for _, e := range entries {
			written[e.Hash] = false
		}
		indexes[i] = entries
	}
	p, err := newPackWriter(w, len(written))
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	for i, h := range packs {
		if err := r.copyPack(p, packPath(dir, h, ".pack"), indexes[i], written); err != nil {
			return plumbing.ZeroHash, nil, fmt.Errorf("compact clone: pack %s: %w", h, err)
		}
	}
	name, err := p.close()
	return name, p.idx, err
}

// readPackIndex returns the entries of a pack index, in the order of their offsets.
func readPackIndex(path string) ([]idxfile.Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("compact clone: %w", err)
	}
	defer func() { _ = f.Close() }()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReader(f)).Decode(idx); err != nil {
		return nil, fmt.Errorf("compact clone: read %s: %w", path, err)
	}
	iter, err := idx.EntriesByOffset()
	if err != nil {
		return nil, fmt.Errorf("compact clone: read %s: %w", path, err)
	}
	defer func() { _ = iter.Close() }()
	var entries []idxfile.Entry
	for {
		e, err := iter.Next()
		if err == io.EOF {
			return entries, nil
		}
		if err != nil {
			return nil, fmt.Errorf("compact clone: read %s: %w", path, err)
		}
		entries = append(entries, *e)
	}
}

// Pack object types of deltas, whose entries cannot be copied as they are.
const (
	packOfsDelta = 6
	packRefDelta = 7
)

// copyPack appends to p the objects of the pack at path (entries in offset order) that written
// says are not written yet, reading the pack once from start to end.
func (r *Repo) copyPack(p *packWriter, path string, entries []idxfile.Entry, written map[plumbing.Hash]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	end := uint64(fi.Size()) - uint64(len(plumbing.ZeroHash)) // the trailer follows the last object
	br := bufio.NewReaderSize(f, 64<<10)
	pos := uint64(0)
	for k, e := range entries {
		next := end
		if k+1 < len(entries) {
			next = entries[k+1].Offset
		}
		if e.Offset < pos || next < e.Offset {
			return fmt.Errorf("entry %s at offset %d out of place", e.Hash, e.Offset)
		}
		if _, err := br.Discard(int(e.Offset - pos)); err != nil {
			return err
		}
		pos = next
		size := int64(next - e.Offset)
		if written[e.Hash] {
			if _, err := br.Discard(int(size)); err != nil {
				return err
			}
			continue
		}
		written[e.Hash] = true
		head, err := br.Peek(1)
		if err != nil {
			return err
		}
		if typ := head[0] >> 4 & 7; typ != packOfsDelta && typ != packRefDelta {
			if err := p.addPacked(e.Hash, e.CRC32, br, int(size)); err != nil {
				return err
			}
			continue
		}
		if _, err := br.Discard(int(size)); err != nil {
			return err
		}
		if err := r.repack(p, e.Hash); err != nil {
			return err
		}
	}
	return nil
}

// repack reads object h whole through the storage and appends it to p.
func (r *Repo) repack(p *packWriter, h plumbing.Hash) error {
	obj, err := r.sto.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return err
	}
	data, err := readObject(r.sto, obj.Type(), h)
	if err != nil {
		return err
	}
	return p.add(h, obj.Type(), data)
}
