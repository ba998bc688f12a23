package gitstore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Commit is a commit object as git reads it.
type Commit struct {
	Tree    plumbing.Hash
	Parents []plumbing.Hash
	// Author and Committer are the first author and committer lines (git fsck refuses a commit
	// with more).
	Author, Committer Ident
	Message           string // what follows the headers' blank line
}

// Ident is an author or committer line as git splits it.
type Ident struct {
	Name, Email string    // as written: callers clean them for their own use
	When        time.Time // in the line's own zone; zero when git reads no date
}

// ParseCommit reads the encoding of a commit (its headers, a blank line, its message), as
// git's parse_commit_buffer does: the tree is the first line and the parents the lines right
// after it; a "parent" line anywhere else is no parent, and headers it does not know (gpgsig,
// mergetag, encoding and their continuation lines) are skipped.
func ParseCommit(data []byte) (Commit, error) {
	header, msg, _ := bytes.Cut(data, []byte("\n\n"))
	c := Commit{Message: string(msg)}
	tree, err := treeOf(header)
	if err != nil {
		return Commit{}, err
	}
	c.Tree = tree
	parents, author, committer := true, false, false
	for i, line := range bytes.Split(header, []byte("\n")) {
		key, value, _ := bytes.Cut(line, []byte(" "))
		switch {
		case i == 0:
		case parents && string(key) == "parent":
			h, ok := hashOf(value)
			if !ok {
				return Commit{}, fmt.Errorf("malformed parent line %q", line)
			}
			c.Parents = append(c.Parents, h)
		case string(key) == "author" && !author:
			parents, author, c.Author = false, true, ParseIdent(string(value))
		case string(key) == "committer" && !committer:
			parents, committer, c.Committer = false, true, ParseIdent(string(value))
		default:
			parents = false
		}
	}
	return c, nil
}

// errNoTree: the commit does not start with its tree line.
var errNoTree = errors.New("no tree line")

// treeOf reads the tree line a commit starts with: "tree <40 hex>".
func treeOf(header []byte) (plumbing.Hash, error) {
	line, _, _ := bytes.Cut(header, []byte("\n"))
	value, ok := bytes.CutPrefix(line, []byte("tree "))
	if !ok {
		return plumbing.ZeroHash, errNoTree
	}
	h, ok := hashOf(value)
	if !ok {
		return plumbing.ZeroHash, fmt.Errorf("malformed tree line %q", line)
	}
	return h, nil
}

func hashOf(hexName []byte) (plumbing.Hash, bool) {
	var h plumbing.Hash
	if len(hexName) != 2*len(h) {
		return h, false
	}
	_, err := hex.Decode(h[:], hexName)
	return h, err == nil
}

// identSpace is what git's isspace matches in a line.
const identSpace = " \t\r"

// ParseIdent splits the value of an author or committer line as git's split_ident_line (ident.c)
// does, so that an edit is credited to the person git log and every Git host show: the name is
// what comes before the first '<' (trailing spaces dropped), the email what lies between it and
// the first '>' after it, and the date "<seconds> <+|-zone>" follows the last '>' of the line.
// Git never writes '<' or '>' in a name or an email, but a commit written by hand may hold them:
// "Mallory <m@x> <alice@x>" is m@x's, as git shows it. A line without "<…>" names nobody, and a
// date without a zone is no date.
func ParseIdent(line string) Ident {
	open := strings.IndexByte(line, '<')
	if open < 0 {
		return Ident{}
	}
	end := strings.IndexByte(line[open+1:], '>')
	if end < 0 {
		return Ident{}
	}
	id := Ident{Name: strings.TrimRight(line[:open], identSpace), Email: line[open+1 : open+1+end]}
	id.When = identDate(line[strings.LastIndexByte(line, '>')+1:])
	return id
}

// identDate reads "<seconds> <+|-><zone>" as git does: the zone's digits are hours and minutes
// (-0130, but +05 is five minutes), seconds too large read as 0, and a date without its zone, or
// a negative one, is none (zero).
func identDate(s string) time.Time {
	s = strings.TrimLeft(s, identSpace)
	secs := leadingDigits(s)
	s = strings.TrimLeft(s[len(secs):], identSpace)
	if secs == "" || s == "" || s[0] != '+' && s[0] != '-' {
		return time.Time{}
	}
	zone := leadingDigits(s[1:])
	if zone == "" {
		return time.Time{}
	}
	sec, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		sec = 0
	}
	hhmm, err := strconv.Atoi(zone)
	if err != nil || hhmm > 1e6 { // no zone of this world: read as UTC
		hhmm = 0
	}
	minutes := hhmm/100*60 + hhmm%100
	if s[0] == '-' {
		minutes = -minutes
	}
	return time.Unix(sec, 0).In(time.FixedZone("", minutes*60))
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
