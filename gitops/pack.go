package gitops

import (
	"bufio"
	"bytes"
	"crypto/sha1" //nolint:gosec // the pack trailer is SHA-1
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/klauspost/compress/zlib"
)

// packWriter streams a version 2 packfile of whole objects (no deltas) and indexes it as it
// goes: it knows each object's name, offset and CRC-32, so the clone keeps the pack without
// reading it again. Fast compression keeps a seed push cheap on CPU: klauspost/compress's level
// 1 packs as small as the standard library's BestSpeed in a third of its time on the tree of a
// large folder (whose 20-byte hashes defeat the standard library's fast path) and in two thirds
// on YAML.
type packWriter struct {
	w   io.Writer
	n   int64       // bytes written: the next object's offset
	sum hash.Hash   // SHA-1 of everything written, the trailer that names the pack
	crc hash.Hash32 // of the current object's packed bytes, header and zlib data, as an idx wants
	zw  *zlib.Writer
	idx *idxfile.Writer
}

// encodedPack is a pack and its index.
type encodedPack struct {
	data []byte
	name plumbing.Hash // the trailer, which names the pack's files
	idx  *idxfile.Writer
}

// write writes the pack to w and returns its name and index, for repo.keepPack.
func (p encodedPack) write(w io.Writer) (plumbing.Hash, *idxfile.Writer, error) {
	_, err := w.Write(p.data)
	return p.name, p.idx, err
}

// compressors keeps the zlib writers of finished packs for the next: a compressor is about half
// a MiB that a new one allocates and clears, and a mirror writes a pack on every push. Unlike a
// sync.Pool, which every GC empties (and a busy mirror collects about as often as it pushes), it
// holds up to two between packs.
var compressors = make(chan *zlib.Writer, 2)

// compressor is a kept zlib writer, or a new one.
func compressor() *zlib.Writer {
	select {
	case zw := <-compressors:
		return zw
	default:
		zw, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed) // the level is valid: no error
		return zw
	}
}

// keepCompressor keeps zw for the next pack, unless two are kept already. It lets go of the pack
// it wrote first.
func keepCompressor(zw *zlib.Writer) {
	zw.Reset(io.Discard)
	select {
	case compressors <- zw:
	default:
	}
}

func newPackWriter(w io.Writer, count int) (*packWriter, error) {
	p := &packWriter{w: w, sum: sha1.New(), crc: crc32.NewIEEE(), idx: new(idxfile.Writer)} //nolint:gosec // see above
	p.zw = compressor()
	_ = p.idx.OnHeader(uint32(count))
	var hdr [12]byte
	copy(hdr[:4], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(count))
	if _, err := p.Write(hdr[:]); err != nil {
		return nil, fmt.Errorf("encode pack: %w", err)
	}
	return p, nil
}

// Write writes b into the pack, counting and hashing it.
func (p *packWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	p.sum.Write(b[:n])
	p.crc.Write(b[:n])
	return n, err
}

// add appends object h of type typ.
func (p *packWriter) add(h plumbing.Hash, typ plumbing.ObjectType, data []byte) error {
	offset := p.n
	p.crc.Reset()
	var oh [16]byte
	if _, err := p.Write(appendObjectHeader(oh[:0], byte(typ), len(data))); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	p.zw.Reset(p)
	if _, err := p.zw.Write(data); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	if err := p.zw.Close(); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	p.idx.Add(h, uint64(offset), p.crc.Sum32())
	return nil
}

// addPacked appends object h as it is packed in another pack, header and compressed data: the
// next size bytes of r, whose CRC-32 is crc.
func (p *packWriter) addPacked(h plumbing.Hash, crc uint32, r *bufio.Reader, size int) error {
	offset := p.n
	for size > 0 {
		chunk, err := r.Peek(min(size, r.Size()))
		if err != nil {
			return fmt.Errorf("encode pack: copy %s: %w", h, err)
		}
		if _, err := p.Write(chunk); err != nil {
			return fmt.Errorf("encode pack: %w", err)
		}
		_, _ = r.Discard(len(chunk)) // peeked: cannot fail
		size -= len(chunk)
	}
	p.idx.Add(h, uint64(offset), crc)
	return nil
}

// close writes the trailer, the SHA-1 of everything before it, completes the index and
// returns the pack's name.
func (p *packWriter) close() (plumbing.Hash, error) {
	if p.zw != nil {
		keepCompressor(p.zw)
		p.zw = nil
	}
	var name plumbing.Hash
	p.sum.Sum(name[:0])
	if _, err := p.w.Write(name[:]); err != nil {
		return name, fmt.Errorf("encode pack: %w", err)
	}
	if err := p.idx.OnFooter(name); err != nil {
		return name, fmt.Errorf("index pack: %w", err)
	}
	return name, nil
}

// encodePack encodes the overlay objects: exactly the objects of the commits being pushed.
func (s *store) encodePack() (encodedPack, error) {
	size := 32
	for _, h := range s.order {
		size += len(s.overlay[h].data)/2 + 16
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	p, err := newPackWriter(buf, len(s.order))
	if err != nil {
		return encodedPack{}, err
	}
	for _, h := range s.order {
		o := s.overlay[h]
		if err := p.add(h, o.typ, o.data); err != nil {
			return encodedPack{}, err
		}
	}
	name, err := p.close()
	if err != nil {
		return encodedPack{}, err
	}
	return encodedPack{data: buf.Bytes(), name: name, idx: p.idx}, nil
}

// appendObjectHeader appends a pack object header: type and size as a little-endian varint.
func appendObjectHeader(b []byte, typ byte, size int) []byte {
	c := typ<<4 | byte(size&0x0f)
	size >>= 4
	for size != 0 {
		b = append(b, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(b, c)
}
