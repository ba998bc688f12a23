package gitops

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
