package gitops

import (
	"bytes"
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

// compactIfNeeded merges every pack but the largest (the clone's initial one, usually) into
// one, when the clone has more than maxPacks. The cost is the size of the small packs only.
func (r *repo) compactIfNeeded() error {
	packs, err := r.sto.ObjectPacks()
	if err != nil || len(packs) <= maxPacks {
		return err
	}
	dir := filepath.Join(r.dir, "objects", "pack")
	size := func(h plumbing.Hash) int64 {
		fi, err := os.Stat(filepath.Join(dir, "pack-"+h.String()+".pack"))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	largest := slices.MaxFunc(packs, func(a, b plumbing.Hash) int { return cmp.Compare(size(a), size(b)) })
	var hashes []plumbing.Hash
	var small []plumbing.Hash
	for _, h := range packs {
		if h == largest {
			continue
		}
		if hashes, err = appendPackHashes(hashes, filepath.Join(dir, "pack-"+h.String()+".idx")); err != nil {
			return err
		}
		small = append(small, h)
	}
	if err := r.keepPack(func(w io.Writer) (plumbing.Hash, *idxfile.Writer, error) { return r.writePack(w, hashes) }); err != nil {
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

// appendPackHashes appends the object names listed in a pack index.
func appendPackHashes(hashes []plumbing.Hash, idxPath string) ([]plumbing.Hash, error) {
	f, err := os.Open(idxPath)
	if err != nil {
		return nil, fmt.Errorf("compact clone: %w", err)
	}
	defer func() { _ = f.Close() }()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		return nil, fmt.Errorf("compact clone: read %s: %w", idxPath, err)
	}
	for _, names := range idx.Names { // the sorted names, by first byte
		for i := 0; i+len(plumbing.ZeroHash) <= len(names); i += len(plumbing.ZeroHash) {
			hashes = append(hashes, plumbing.Hash(names[i:i+len(plumbing.ZeroHash)]))
		}
	}
	return hashes, nil
}

// writePack streams the objects into one pack, one object in memory at a time, and returns its
// name and index.
func (r *repo) writePack(w io.Writer, hashes []plumbing.Hash) (plumbing.Hash, *idxfile.Writer, error) {
	slices.SortFunc(hashes, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	hashes = slices.Compact(hashes)
	p, err := newPackWriter(w, len(hashes))
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	s := newStore(r.sto)
	for _, h := range hashes {
		obj, err := r.sto.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return plumbing.ZeroHash, nil, fmt.Errorf("compact clone: %w", err)
		}
		data, err := s.read(obj.Type(), h)
		if err != nil {
			return plumbing.ZeroHash, nil, fmt.Errorf("compact clone: %w", err)
		}
		if err := p.add(h, obj.Type(), data); err != nil {
			return plumbing.ZeroHash, nil, err
		}
	}
	name, err := p.close()
	return name, p.idx, err
}
