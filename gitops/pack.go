package gitops

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1" //nolint:gosec // the pack trailer is SHA-1
	"encoding/binary"
	"fmt"
)

// encodePack writes the overlay objects (exactly the objects of the commits being pushed) as a
// version 2 packfile without deltas. Fast compression keeps a seed push cheap on CPU.
func (s *store) encodePack() ([]byte, error) {
	size := 32
	for _, h := range s.order {
		size += len(s.overlay[h].data)/2 + 16
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	var hdr [12]byte
	copy(hdr[:4], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(s.order)))
	buf.Write(hdr[:])
	zw, err := zlib.NewWriterLevel(buf, zlib.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("encode pack: %w", err)
	}
	var oh [16]byte
	for _, h := range s.order {
		o := s.overlay[h]
		buf.Write(appendObjectHeader(oh[:0], byte(o.typ), len(o.data)))
		zw.Reset(buf)
		if _, err := zw.Write(o.data); err != nil {
			return nil, fmt.Errorf("encode pack: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("encode pack: %w", err)
		}
	}
	sum := sha1.Sum(buf.Bytes()) //nolint:gosec // the pack trailer is SHA-1
	buf.Write(sum[:])
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
