package gitstore

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

// packWriter streams a version 2 packfile and indexes it as it
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
	idx *idxfile.Writer // nil for a pack only sent: the remote indexes what it receives
}

// Pack is the pack of a push: the objects of the commits built, to send.
type Pack struct {
	data []byte
	// offsets and crcs locate the entry of each object, in the order of Store.order, so the
	// clone takes whole objects from it as they are packed (Repo.KeepPushed).
	offsets []int64
	crcs    []uint32
}

// Bytes is the encoded pack, nil for the zero Pack.
func (p Pack) Bytes() []byte { return p.data }

// entry returns the packed bytes of the i-th object, header and compressed data, their CRC-32,
// and whether they hold the object whole (a delta's entry depends on where its base is).
func (p Pack) entry(i int) (raw []byte, crc uint32, whole bool) {
	end := int64(len(p.data) - len(plumbing.ZeroHash))
	if i+1 < len(p.offsets) {
		end = p.offsets[i+1]
	}
	raw = p.data[p.offsets[i]:end]
	typ := raw[0] >> 4 & 7
	return raw, p.crcs[i], typ != packOfsDelta && typ != packRefDelta
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
	var oh [16]byte
	return p.addEntry(h, appendObjectHeader(oh[:0], byte(typ), len(data)), data)
}

// addOfsDelta appends object h as delta against the object written dist bytes before it.
func (p *packWriter) addOfsDelta(h plumbing.Hash, dist int64, delta []byte) error {
	var oh [32]byte
	return p.addEntry(h, appendOffset(appendObjectHeader(oh[:0], packOfsDelta, len(delta)), dist), delta)
}

// addRefDelta appends object h as delta against base, an object the pack does not hold: only a
// thin pack, sent to a remote that has base, may.
func (p *packWriter) addRefDelta(h, base plumbing.Hash, delta []byte) error {
	var oh [40]byte
	return p.addEntry(h, append(appendObjectHeader(oh[:0], packRefDelta, len(delta)), base[:]...), delta)
}

// addEntry appends object h: its entry's header, then data compressed.
func (p *packWriter) addEntry(h plumbing.Hash, header, data []byte) error {
	offset := p.n
	p.crc.Reset()
	if _, err := p.Write(header); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	p.zw.Reset(p)
	if _, err := p.zw.Write(data); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	if err := p.zw.Close(); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	p.index(h, offset, p.crc.Sum32())
	return nil
}

// addRaw appends object h as it is packed in another pack: raw, header and compressed data,
// whose CRC-32 is crc. Only a whole object's entry means the same in any pack.
func (p *packWriter) addRaw(h plumbing.Hash, raw []byte, crc uint32) error {
	offset := p.n
	p.crc.Reset()
	if _, err := p.Write(raw); err != nil {
		return fmt.Errorf("encode pack: %w", err)
	}
	p.index(h, offset, crc)
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
	p.index(h, offset, crc)
	return nil
}

// index records object h at offset, whose entry's CRC-32 is crc, in the pack's index.
func (p *packWriter) index(h plumbing.Hash, offset int64, crc uint32) {
	if p.idx != nil {
		p.idx.Add(h, uint64(offset), crc)
	}
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
	if p.idx == nil {
		return name, nil
	}
	if err := p.idx.OnFooter(name); err != nil {
		return name, fmt.Errorf("index pack: %w", err)
	}
	return name, nil
}

// Pack encodes the overlay objects: exactly the objects of the commits being pushed. An object
// with a base goes as a delta: against a tree earlier in the pack by offset, else, when thin,
// against the remote's copy by name (the remote has every base: each is the version the commits
// replace). Whole otherwise.
func (s *Store) Pack(thin bool) (Pack, error) {
	size := 32
	for _, h := range s.order {
		o := s.overlay[h]
		if o.delta != nil && thin {
			size += len(o.delta) + 32
		} else {
			size += len(o.data)/2 + 16
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	p, err := newPackWriter(buf, len(s.order))
	if err != nil {
		return Pack{}, err
	}
	p.idx = nil                        // the clone indexes the packs it keeps of it (KeepPushed)
	trees := map[plumbing.Hash]int64{} // the offsets of the trees written, bases of later ones
	offsets, crcs := make([]int64, 0, len(s.order)), make([]uint32, 0, len(s.order))
	for _, h := range s.order {
		o, at := s.overlay[h], p.n
		if o.delta == nil {
			err = p.add(h, o.typ, o.data)
		} else {
			err = s.addDelta(p, h, o, trees, thin)
		}
		if err != nil {
			return Pack{}, err
		}
		if o.typ == plumbing.TreeObject {
			trees[h] = at
		}
		offsets, crcs = append(offsets, at), append(crcs, p.crc.Sum32())
	}
	if _, err := p.close(); err != nil {
		return Pack{}, err
	}
	return Pack{data: buf.Bytes(), offsets: offsets, crcs: crcs}, nil
}

// addDelta appends object h, which has a delta, to the pack p: against its base by offset when
// the pack holds the base (trees, the offsets of the trees written), by name when the pack is
// thin and the base is the remote's, else whole.
func (s *Store) addDelta(p *packWriter, h plumbing.Hash, o rawObject, trees map[plumbing.Hash]int64, thin bool) error {
	if baseAt, ok := trees[o.base]; ok {
		return p.addOfsDelta(h, p.n-baseAt, o.delta)
	}
	if _, inOverlay := s.overlay[o.base]; thin && !inOverlay {
		return p.addRefDelta(h, o.base, o.delta)
	}
	return p.add(h, o.typ, o.data)
}

// appendOffset appends the distance back to an OFS_DELTA's base: big-endian base-128 in which
// each byte but the last also adds one to what precedes it, so no length has two spellings.
func appendOffset(b []byte, dist int64) []byte {
	var tmp [10]byte
	i := len(tmp) - 1
	tmp[i] = byte(dist & 0x7f)
	for dist >>= 7; dist > 0; dist >>= 7 {
		dist--
		i--
		tmp[i] = 0x80 | byte(dist&0x7f)
	}
	return append(b, tmp[i:]...)
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
