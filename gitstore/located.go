package gitstore

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/klauspost/compress/zlib"
)

// Every change of a file reads the file's previous version, to send the new one as a delta
// against it. Through go-git that read asks each pack's index in turn and decodes through a
// pack scanner: a fifth of the daemon's CPU at 4,000 changes a second. So the Repo remembers
// where its clone holds the blobs of files it changed (KeepPushed writes each whole into a pack
// and says where), as the next change of such a file reads it, and its store reads them itself: one read
// at the offset, one inflate, and the object's name checked against the bytes, so a location
// that is wrong can never make a wrong delta. Anything else is read through go-git.

// locatedMax bounds the blobs a clone's locator remembers (about 60 bytes each): past it, no
// more, until changes forget some.
const locatedMax = 1 << 16

// locatedFilesMax bounds the packs kept open for reading them; past it, all are closed. A pack
// merged away stays readable while open (its bytes do not change), and is then forgotten.
const locatedFilesMax = 8

// locatedBlobMax bounds the blob a location is believed about: a header that says more is not
// the entry KeepPushed wrote.
const locatedBlobMax = 64 << 20

// blobAt is where a pack file holds a blob whole.
type blobAt struct {
	pack   string
	offset int64
}

// locator finds and reads the blobs it was told about; the zero locator knows none, and a nil
// one is the zero one.
type locator struct {
	at    map[plumbing.Hash]blobAt
	files map[string]*os.File
	br    *bufio.Reader
	zr    io.ReadCloser
}

// locate records that pack holds blob h whole at offset.
func (l *locator) locate(h plumbing.Hash, pack string, offset int64) {
	if l == nil {
		return
	}
	if l.at == nil {
		l.at = map[plumbing.Hash]blobAt{}
	}
	if len(l.at) < locatedMax {
		l.at[h] = blobAt{pack: pack, offset: offset}
	}
}

// forget drops blob h: the file it was the version of has a newer one.
func (l *locator) forget(h plumbing.Hash) {
	if l != nil {
		delete(l.at, h)
	}
}

// read returns blob h when it is located and reads back as h; false sends the caller to go-git
// (and forgets h, so it is not tried again).
func (l *locator) read(h plumbing.Hash) ([]byte, bool) {
	if l == nil {
		return nil, false
	}
	at, ok := l.at[h]
	if !ok {
		return nil, false
	}
	data, err := l.readAt(at)
	if err != nil || objectHash(plumbing.BlobObject, data) != h {
		delete(l.at, h)
		return nil, false
	}
	return data, true
}

// readAt reads the whole blob at at.
func (l *locator) readAt(at blobAt) ([]byte, error) {
	f, err := l.file(at.pack)
	if err != nil {
		return nil, err
	}
	if l.br == nil {
		l.br = bufio.NewReaderSize(nil, 4<<10)
	}
	l.br.Reset(io.NewSectionReader(f, at.offset, 1<<62))
	typ, size, err := readEntryHeader(l.br)
	if err != nil {
		return nil, err
	}
	if typ != byte(plumbing.BlobObject) || size > locatedBlobMax {
		return nil, fmt.Errorf("entry at %d of %s: type %d, %d bytes: not a blob read here", at.offset, at.pack, typ, size)
	}
	if l.zr == nil {
		l.zr, err = zlib.NewReader(l.br)
	} else {
		err = l.zr.(zlib.Resetter).Reset(l.br, nil)
	}
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(l.zr, data); err != nil {
		return nil, err
	}
	return data, nil
}

// file is the open pack file at path.
func (l *locator) file(path string) (*os.File, error) {
	if f, ok := l.files[path]; ok {
		return f, nil
	}
	if len(l.files) >= locatedFilesMax {
		l.closeFiles()
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if l.files == nil {
		l.files = map[string]*os.File{}
	}
	l.files[path] = f
	return f, nil
}

// closeFiles closes the pack files it opened.
func (l *locator) closeFiles() {
	for path, f := range l.files {
		_ = f.Close()
		delete(l.files, path)
	}
}

// reset closes the pack files and forgets every location: the clone is closed.
func (l *locator) reset() {
	l.closeFiles()
	l.at = nil
}

// readEntryHeader reads a pack entry's header: its type and the size of its data inflated.
func readEntryHeader(br io.ByteReader) (typ byte, size int64, err error) {
	b, err := br.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	typ, size = b>>4&7, int64(b&0x0f)
	for shift := 4; b&0x80 != 0; shift += 7 {
		if shift > 56 {
			return 0, 0, fmt.Errorf("pack entry header too long")
		}
		if b, err = br.ReadByte(); err != nil {
			return 0, 0, err
		}
		size |= int64(b&0x7f) << shift
	}
	return typ, size, nil
}
