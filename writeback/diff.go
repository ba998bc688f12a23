package writeback

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"
)

// MaxDiffBytes caps a proposal's diff; a longer one is cut with a last line saying how much was
// left out.
const MaxDiffBytes = 256 << 10

// diffContextLines is the context around each change, as diff -u and git diff show it.
const diffContextLines = 3

// UnifiedDiff is a unified diff (3 lines of context, "--- live" / "+++ desired" headers and @@
// hunks, like `diff -u`) from the live YAML to the desired YAML, which `patch -p0` or
// `git apply -p0` applies to a file holding live. liveName and desiredName are the names in the
// headers ("live" and "desired" when empty; quoted like Go strings when they hold control
// characters). Either side may be empty (create: live empty; destroy: desired empty). Equal
// inputs give "". A side not ending in a newline gets git's "\ No newline at end of file".
//
// The diff is minimal for up to about a hundred changed lines; beyond that the algorithm (the
// Go tools' Myers diff, through github.com/aymanbagabas/go-udiff) bounds its work and may show
// a changed region as larger than it is, so any input takes linear time. A diff longer than
// MaxDiffBytes is cut (see cutDiff).
func UnifiedDiff(live, desired []byte, liveName, desiredName string) string {
	if bytes.Equal(live, desired) {
		return ""
	}
	before := string(live)
	edits := udiff.Lines(before, string(desired))
	out, err := udiff.ToUnified(diffLabel(liveName, "live"), diffLabel(desiredName, "desired"), before, edits, diffContextLines)
	if err != nil {
		// ToUnified fails only on edits that do not fit the text, and Lines made them from it.
		return fmt.Sprintf("... no diff: %v\n", err)
	}
	return cutDiff(out, MaxDiffBytes)
}

// diffLabel is the name shown in a header line: fallback for an empty name, a quoted string for
// one that would break the line.
func diffLabel(name, fallback string) string {
	switch {
	case name == "":
		return fallback
	case strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return strconv.Quote(name)
	}
	return name
}

// diffNoteRoom is the room kept below the limit for the note of a cut diff: its longest form,
// with two 20-digit numbers, is well below it.
const diffNoteRoom = 128

// cutDiff returns diff unchanged if it is at most limit bytes long. Otherwise it keeps the
// beginning, up to the last whole line that fits, and adds a last line
//
//	... N more lines (M bytes) of the diff left out
//
// so that the result is at most limit bytes. When no line ends in the second half of the room
// (one huge line), the cut falls inside that line, between UTF-8 characters, so the result
// still shows most of what fits. limit must exceed diffNoteRoom.
func cutDiff(diff string, limit int) string {
	if len(diff) <= limit {
		return diff
	}
	room := limit - diffNoteRoom
	cut := strings.LastIndexByte(diff[:room], '\n') + 1
	if cut <= room/2 {
		cut = room
		for cut > 0 && !utf8.RuneStart(diff[cut]) {
			cut--
		}
	}
	kept, rest := diff[:cut], diff[cut:]
	lines := strings.Count(rest, "\n")
	if !strings.HasSuffix(rest, "\n") {
		lines++
	}
	var b strings.Builder
	b.Grow(limit)
	b.WriteString(kept)
	if !strings.HasSuffix(kept, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "... %d more lines (%d bytes) of the diff left out\n", lines, len(rest))
	return b.String()
}
