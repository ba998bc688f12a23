package gitstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// keepPack puts a pack into the clone with the index built while it was written (by write,
// which returns the pack's name and index): see placePack. Nothing reads it again.
func (r *Repo) keepPack(write packWrite) error {
	p, err := r.placePack(write)
	if err == nil {
		err = r.adopt(p)
	}
	if err != nil {
		return fmt.Errorf("keep pack in the clone: %w", err)
	}
	return nil
}

// packWrite writes a pack and returns its name and index.
type packWrite func(io.Writer) (plumbing.Hash, *idxfile.Writer, error)

// placedPack is a pack in place in the clone, and its index, for the storage to adopt.
type placedPack struct {
	name plumbing.Hash
	idx  *idxfile.Writer
}

// placePack writes a pack and its index (by write) each to a temporary file, then renames them
// to objects/pack/pack-<name>.pack and .idx, the pack first as git does.
func (r *Repo) placePack(write packWrite) (placedPack, error) {
	dir := r.packDir()
	var name plumbing.Hash
	var idx *idxfile.Writer
	pack, err := writeTemp(dir, func(w io.Writer) (err error) {
		name, idx, err = write(w)
		return err
	})
	defer func() { _ = os.Remove(pack) }() // gone once renamed
	if err != nil {
		return placedPack{}, err
	}
	index, err := writeTemp(dir, func(w io.Writer) error {
		mi, err := idx.Index()
		if err == nil {
			_, err = idxfile.NewEncoder(w).Encode(mi)
		}
		return err
	})
	defer func() { _ = os.Remove(index) }()
	base := filepath.Join(dir, "pack-"+name.String())
	if err == nil {
		err = os.Rename(pack, base+".pack")
	}
	if err == nil {
		err = os.Rename(index, base+".idx")
	}
	return placedPack{name: name, idx: idx}, err
}

// writeTemp writes a new read-only file in dir through write and returns its name.
func writeTemp(dir string, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(f, 8<<10) // the idx encoder writes 4 bytes at a time
	if err = write(bw); err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Chmod(0o444)
	}
	return f.Name(), errors.Join(err, f.Close())
}

// adopt has the storage take in packs that are in place, without reading them. go-git's way
// in is the hook its own pack writer calls with the index it built: one is opened (which also
// makes the storage list the packs again), handed ours, and closed empty, which writes
// nothing. Should the writer be another, the storage reads every index again.
func (r *Repo) adopt(packs ...placedPack) error {
	w, err := r.sto.PackfileWriter()
	if err != nil {
		return err
	}
	if pw, ok := w.(*dotgit.PackWriter); ok && pw.Notify != nil {
		for _, p := range packs {
			pw.Notify(p.name, p.idx)
		}
	} else {
		r.sto.Reindex()
	}
	return w.Close()
}
