package gitstore

import (
	"bytes"
	"hash/maphash"
)

// A tree the daemon writes again differs from its previous version in the few entries the
// commit changed: the rest of it, hashes and all, is the same bytes. Git stores and sends such
// an object as a delta, instructions that copy ranges of its base and insert new bytes. The
// daemon knows which entries it kept, so it writes the delta while merging the two entry lists,
// in one pass and without searching for matches as a generic differ must.

// deltaMinSize is the smallest tree worth a delta: below it, the whole object compressed is
// about as small, and reads stay one step.
const deltaMinSize = 512

// maxCopy is the most one copy instruction takes: 2^24-1 bytes, its three size bytes.
const maxCopy = 1<<24 - 1

// treeDelta returns the delta that makes the encoding of next from the encoding of prev, or nil
// when it is not worth keeping (less than half the size of next's encoding, size). Both are
// sorted in Git order, as trees are.
func treeDelta(prev, next []TreeEntry, size int) []byte {
	if size < deltaMinSize || len(prev) == 0 {
		return nil
	}
	prevSize := 0
	for i := range prev {
		prevSize += entrySize(&prev[i])
	}
	d := deltaWriter{out: make([]byte, 0, 64)}
	d.out = appendDeltaSize(d.out, prevSize)
	d.out = appendDeltaSize(d.out, size)
	i, off := 0, 0 // the next entry of prev and its offset
	for j := range next {
		for i < len(prev) && entryBefore(&prev[i], &next[j]) {
			off += entrySize(&prev[i])
			i++
		}
		if i < len(prev) && prev[i] == next[j] {
			n := entrySize(&prev[i])
			d.copy(off, n)
			off += n
			i++
			continue
		}
		d.insertEntry(&next[j])
		if len(d.out)+len(d.insert) > size/2 {
			return nil
		}
	}
	d.flush()
	if len(d.out) > size/2 {
		return nil
	}
	return d.out
}

// entrySize is the length of e's encoding in a tree: mode, space, name, NUL, hash.
func entrySize(e *TreeEntry) int { return len(e.Mode) + len(e.Name) + 2 + len(e.Hash) }

// entryBefore reports whether a sorts before b in a tree (a directory sorts as its name and "/").
func entryBefore(a, b *TreeEntry) bool {
	key := b.Name
	if b.IsDir() {
		key += "/"
	}
	return compareKey(a.Name, a.IsDir(), key) < 0
}

// deltaWriter accumulates delta instructions, merging adjacent copies and inserts.
type deltaWriter struct {
	out               []byte
	copyOff, copySize int    // the pending copy, when copySize > 0
	insert            []byte // the pending literal bytes
}

func (d *deltaWriter) copy(off, n int) {
	if d.copySize > 0 && d.copyOff+d.copySize == off {
		d.copySize += n
		return
	}
	d.flush()
	d.copyOff, d.copySize = off, n
}

// blobDelta returns the delta that makes data from old, or nil when it is not worth keeping
// (more than half the size of data). An object's file changes where the object changed, mostly in
// one place, so the delta copies what old and data share at their start and at their end and
// inserts what lies between, found in one pass. When that leaves more than a quarter of data to
// insert (changes far apart), the lines between are copied from old where old has them, found
// by a hash of each line: a YAML file changes line by line. go-git's differ, used before, also
// searched for runs that start mid-line: a quarter of the daemon's CPU at 4,000 updates a second.
func blobDelta(old, data []byte) []byte {
	pre := commonPrefix(old, data)
	suf := commonSuffix(old[pre:], data[pre:])
	mid := data[pre : len(data)-suf]
	d := deltaWriter{out: make([]byte, 0, 24+min(len(mid), len(data)/2))}
	d.out = appendDeltaSize(d.out, len(old))
	d.out = appendDeltaSize(d.out, len(data))
	if pre > 0 {
		d.copy(0, pre)
	}
	if len(mid) <= len(data)/4 {
		d.insertBytes(mid)
	} else if !d.lines(old, mid, len(data)/2) {
		return nil
	}
	if suf > 0 {
		d.copy(len(old)-suf, suf)
	}
	d.flush()
	if len(d.out) > len(data)/2 {
		return nil
	}
	return d.out
}

// lines writes mid line by line: a copy of the line from old where old has it, else the line
// itself. It gives up (false) once the delta outgrows limit.
func (d *deltaWriter) lines(old, mid []byte, limit int) bool {
	at := map[uint64]int{} // a line's hash → where it starts in old
	for off := 0; off < len(old); {
		n := lineLen(old[off:])
		h := maphash.Bytes(lineSeed, old[off:off+n])
		if _, ok := at[h]; !ok {
			at[h] = off
		}
		off += n
	}
	for len(mid) > 0 {
		n := lineLen(mid)
		line := mid[:n]
		off, found := 0, false
		if n >= 8 { // a shorter line costs less inserted than a copy instruction
			off, found = at[maphash.Bytes(lineSeed, line)]
			found = found && off+n <= len(old) && bytes.Equal(old[off:off+n], line)
		}
		if found {
			d.copy(off, n)
		} else {
			d.insertBytes(line)
		}
		if len(d.out)+len(d.insert) > limit {
			return false
		}
		mid = mid[n:]
	}
	return true
}

// lineSeed seeds the hashes of lines: one for the process, not one per file written.
var lineSeed = maphash.MakeSeed()

// lineLen is the length of the first line of b, its newline included.
func lineLen(b []byte) int {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return i + 1
	}
	return len(b)
}

// commonPrefix is the length of the longest prefix a and b share.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// commonSuffix is the length of the longest suffix a and b share.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 1; i <= n; i++ {
		if a[len(a)-i] != b[len(b)-i] {
			return i - 1
		}
	}
	return n
}

func (d *deltaWriter) insertBytes(b []byte) {
	d.flushCopy()
	d.insert = append(d.insert, b...)
}

func (d *deltaWriter) insertEntry(e *TreeEntry) {
	d.flushCopy()
	d.insert = append(d.insert, e.Mode...)
	d.insert = append(d.insert, ' ')
	d.insert = append(d.insert, e.Name...)
	d.insert = append(d.insert, 0)
	d.insert = append(d.insert, e.Hash[:]...)
}

func (d *deltaWriter) flush() {
	d.flushCopy()
	d.flushInsert()
}

func (d *deltaWriter) flushCopy() {
	for d.copySize > 0 {
		n := min(d.copySize, maxCopy)
		d.out = appendCopy(d.out, d.copyOff, n)
		d.copyOff += n
		d.copySize -= n
	}
}

// flushInsert writes the pending literal bytes, at most 127 per instruction.
func (d *deltaWriter) flushInsert() {
	for b := d.insert; len(b) > 0; {
		n := min(len(b), 127)
		d.out = append(d.out, byte(n))
		d.out = append(d.out, b[:n]...)
		b = b[n:]
	}
	d.insert = d.insert[:0]
}

// appendDeltaSize appends a size of a delta's header: little-endian base-128.
func appendDeltaSize(b []byte, n int) []byte {
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// appendCopy appends a copy instruction: a command byte whose low bits say which bytes of the
// offset (four) and size (three) follow, then those bytes that are not zero.
func appendCopy(b []byte, off, n int) []byte {
	at := len(b)
	cmd := byte(0x80)
	b = append(b, 0)
	for k := range 4 {
		if v := byte(off >> (8 * k)); v != 0 {
			cmd |= 1 << k
			b = append(b, v)
		}
	}
	for k := range 3 {
		if v := byte(n >> (8 * k)); v != 0 {
			cmd |= 0x10 << k
			b = append(b, v)
		}
	}
	b[at] = cmd
	return b
}
