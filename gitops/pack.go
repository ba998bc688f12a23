package gitops

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1" //nolint:gosec // the pack trailer is SHA-1
	"encoding/binary"
	"fmt"
	"hash"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
)

// packWriter streams a version 2 packfile of whole objects (no deltas). Fast compression keeps
// a seed push cheap on CPU.
type packWriter struct {
	out io.Writer // the destination and the trailer's hash
	sum hash.Hash
	zw  *zlib.Writer
}

func newPackWriter(w io.Writer, count int) (*packWriter, error) {
	sum := sha1.New() //nolint:gosec // the pack trailer is SHA-1
	p := &packWriter{out: io.MultiWriter(w, sum), sum: sum}
	zw, err := zlib.NewWriterLevel(p.out, zlib.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("encode pack: %w", err)
	}
	p.zw = zw
	var hdr [12]byte
	copy(hdr[:4], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(count))
	if _, err := p.out.Write(hdr[:]); err != nil {
		return nil, fmt.Errorf("encode pack: %w", err)
	}
	return p, nil
}

func (p *packWriter) add(typ plumbing.ObjectType, data []byte) error {
	var oh [16]byte
	if _, err := p.out.Write(appendObjectHeader(oh[:0], byte(typ), len(data))); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	p.zw.Reset(p.out)
	if _, err := p.zw.Write(data); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	if err := p.zw.Close(); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	return nil
}

// close writes the trailer, the SHA-1 of everything before it.
func (p *packWriter) close(w io.Writer) error {
	if _, err := w.Write(p.sum.Sum(nil)); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	return nil
}

// encodePack encodes the overlay objects: exactly the objects of the commits being pushed.
func (s *store) encodePack() ([]byte, error) {
	size := 32
	for _, h := range s.order {
		size += len(s.overlay[h].data)/2 + 16
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	p, err := newPackWriter(buf, len(s.order))
	if err != nil {
		return nil, err
	}
	for _, h := range s.order {
		o := s.overlay[h]
		if err := p.add(o.typ, o.data); err != nil {
			return nil, err
		}
	}
	if err := p.close(buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
