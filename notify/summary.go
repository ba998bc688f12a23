package notify

import (
	"regexp"
	"strconv"
	"strings"
)

// maxDiffLines bounds a summarized diff: a notice says what changed, the page shows all of it.
const maxDiffLines = 20

// secretLike matches a key whose value must never be shown: a password, a token, a key...
var secretLike = regexp.MustCompile(`(?i)(pass(word|wd)?|secret|token|credential|private|api[-_]?key|access[-_]?key|auth|cert|\bkey\b|[-_.]key\b)`)

// Summarize makes a proposal's unified diff fit a message: its changed lines (no headers, no
// context), at most maxDiffLines of them. Values that may be secret are hidden, keys kept (see
// summarizer): a Secret's data is SOPS-encrypted in Git, but a ConfigMap key named password is
// not, and a channel is read by more people than the cluster's Secrets are.
func Summarize(kind, diff string) string {
	s := summarizer{secret: kind == "Secret", hiding: -1}
	var out []string
	more := 0
	for line := range strings.SplitSeq(diff, "\n") {
		if line == "" || strings.HasPrefix(line, "+++") || strings.HasPrefix(line, "---") || strings.HasPrefix(line, "@@") {
			continue
		}
		shown := s.line(line[:1], line[1:])
		if line[0] != '+' && line[0] != '-' {
			continue // context: read for the blocks it opens, never shown
		}
		if len(out) == maxDiffLines {
			more++
			continue
		}
		out = append(out, shown)
	}
	if more > 0 {
		out = append(out, "… "+strconv.Itoa(more)+" more changed lines")
	}
	return strings.Join(out, "\n")
}

// summarizer hides, line by line of a diff, every value that may be secret: every value of a
// Secret, the value of a line that names a secret-like word anywhere (password, token, key, ...;
// a flow mapping {password: x} included), and every line of the block under such a key (a block
// scalar, a nested mapping), which it follows by indentation across context lines too.
type summarizer struct {
	secret bool
	hiding int // the indentation of the key whose block is hidden; -1 when none is
}

func (s *summarizer) line(sign, body string) string {
	indent := len(body) - len(strings.TrimLeft(body, " "))
	if s.hiding >= 0 && indent > s.hiding && strings.TrimSpace(body) != "" {
		return sign + strings.Repeat(" ", indent) + "(hidden)"
	}
	s.hiding = -1
	key, value, hasKey := strings.Cut(body, ":")
	sensitive := s.secret || secretLike.MatchString(body)
	switch {
	case !sensitive:
		return sign + body
	case !hasKey:
		return sign + strings.Repeat(" ", indent) + "(hidden)"
	}
	if v := strings.TrimSpace(value); v == "" || v == "|" || v == ">" || strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">") {
		s.hiding = indent // a block follows: hide it
	}
	return sign + key + ": (hidden)"
}
