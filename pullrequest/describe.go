package pullrequest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Operations of a Change.
const (
	ChangeCreate = "create"
	ChangeUpdate = "update"
	ChangeDelete = "delete"
)

// Change is what happened to objects of one kind.
type Change struct {
	Kind string // "ConfigMap", or a resource, "configmaps"
	Op   string // ChangeCreate, ChangeUpdate or ChangeDelete
}

// Summary is what the changes waiting in a head branch add up to.
type Summary struct {
	Destination  string // the GitTarget's namespace/name
	Target, Head string // branches
	Folder       string // where the destination writes in the repository
	Changes      map[Change]int
	Authors      []string  // "Name <email>", in order of first change
	Oldest       time.Time // author time of the oldest change waiting; zero when unknown
	Commits      int
}

// Limits of what Describe writes: GitHub takes at most 65536 characters of body, and every
// host at most 255 of title.
const (
	maxBodyBytes   = 60_000
	maxAuthors     = 50
	maxFieldRunes  = 200 // one name, kind or path in the body
	maxTitleFields = 100 // the folder or destination in the title
)

// Describe renders the title and markdown body of the request that delivers s. The same
// summary gives the same text byte for byte: everything is sorted, and the age of the oldest
// change is an absolute UTC time, so a request is only edited when something changed.
func Describe(s Summary) (title, body string) {
	total := 0
	for _, n := range s.Changes {
		total += max(n, 0)
	}
	title = fmt.Sprintf("gitops-reverser: %s", plural(total, "change"))
	if s.Folder != "" {
		title += " in " + oneLine(clip(s.Folder, maxTitleFields))
	}
	if s.Destination != "" {
		title += " (" + oneLine(clip(s.Destination, maxTitleFields)) + ")"
	}
	return title, describeBody(s, total)
}

// describeBody writes the intro, the table, the authors and the ownership note; rows of the
// table give way first when the body would pass maxBodyBytes.
func describeBody(s Summary, total int) string {
	var intro strings.Builder
	fmt.Fprintf(&intro, "%s from the cluster, mirrored by %s", capital(plural(total, "change")), code(s.Destination))
	if s.Folder != "" {
		fmt.Fprintf(&intro, " into %s", code(s.Folder))
	}
	fmt.Fprintf(&intro, ", waiting to be merged into %s.\n\n", code(s.Target))

	header, rows, footer := changeTable(s.Changes)
	var tail strings.Builder
	tail.WriteString(footer)
	writeAuthors(&tail, s.Authors, s.Commits)
	if !s.Oldest.IsZero() {
		fmt.Fprintf(&tail, "Oldest change waiting since %s.\n\n", s.Oldest.UTC().Format("2006-01-02 15:04 UTC"))
	}
	fmt.Fprintf(&tail, "---\nThe branch %s is owned by gitops-reverser: it is rebuilt whenever %s moves, "+
		"so a commit pushed to it is lost. Do not push to it; merge this request to deliver the changes.\n",
		code(s.Head), code(s.Target))

	room := maxBodyBytes - intro.Len() - len(header) - tail.Len()
	var b strings.Builder
	b.WriteString(intro.String())
	b.WriteString(header)
	for i, row := range rows {
		more := fmt.Sprintf("| … and %d more kinds |\n", len(rows)-i)
		if len(row)+len(more) > room {
			b.WriteString(more)
			break
		}
		room -= len(row)
		b.WriteString(row)
	}
	b.WriteString(tail.String())
	return b.String()
}

// changeTable renders the counts by kind (rows, sorted) and operation (columns: create,
// update, delete, then any other in order), with a total row as footer.
func changeTable(changes map[Change]int) (header string, rows []string, footer string) {
	kindSet, opSet := map[string]bool{}, map[string]bool{}
	for c, n := range changes {
		if n > 0 {
			kindSet[c.Kind], opSet[c.Op] = true, true
		}
	}
	kinds, ops := slices.Collect(maps.Keys(kindSet)), slices.Collect(maps.Keys(opSet))
	if len(kinds) == 0 {
		return "", nil, ""
	}
	slices.Sort(kinds)
	slices.SortFunc(ops, func(a, b string) int {
		if ra, rb := opRank(a), opRank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	var h strings.Builder
	h.WriteString("| Kind |")
	for _, op := range ops {
		h.WriteString(" " + cell(op) + " |")
	}
	h.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(ops)) + "\n")
	sums := make([]int, len(ops))
	for _, k := range kinds {
		row := "| " + code(k) + " |"
		for i, op := range ops {
			n := max(changes[Change{Kind: k, Op: op}], 0)
			sums[i] += n
			row += " " + count(n) + " |"
		}
		rows = append(rows, row+"\n")
	}
	footer = "| **total** |"
	for _, n := range sums {
		footer += fmt.Sprintf(" **%d** |", n)
	}
	return h.String(), rows, footer + "\n\n"
}

// writeAuthors lists the authors, each once, at most maxAuthors of them.
func writeAuthors(b *strings.Builder, authors []string, commits int) {
	var seen []string
	dup := map[string]bool{}
	for _, a := range authors {
		if a = strings.TrimSpace(a); a != "" && !dup[a] {
			dup[a] = true
			seen = append(seen, a)
		}
	}
	switch {
	case len(seen) == 0 && commits <= 0:
		return
	case len(seen) == 0:
		fmt.Fprintf(b, "%s.\n\n", capital(plural(commits, "commit")))
		return
	case commits > 0:
		fmt.Fprintf(b, "%s by:\n", capital(plural(commits, "commit")))
	default:
		b.WriteString("By:\n")
	}
	for i, a := range seen {
		if i == maxAuthors {
			fmt.Fprintf(b, "- … and %d more\n", len(seen)-maxAuthors)
			break
		}
		fmt.Fprintf(b, "- %s\n", code(a))
	}
	b.WriteString("\n")
}

// opRank orders the table's columns.
func opRank(op string) int {
	switch op {
	case ChangeCreate:
		return 0
	case ChangeUpdate:
		return 1
	case ChangeDelete:
		return 2
	}
	return 3
}

// code renders s as an inline code span, so no markdown, HTML or @mention in a name or path
// takes effect, safe in a table cell too.
func code(s string) string {
	if s == "" {
		return "(none)"
	}
	return "`" + cell(strings.ReplaceAll(clip(s, maxFieldRunes), "`", "'")) + "`"
}

// cell makes s one line that cannot end a table cell.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

// oneLine replaces control characters, line breaks among them, with spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// count renders a table count; empty for none, to keep the table quiet.
func count(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

// clip cuts s to at most n runes, marking the cut with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// plural writes "1 change", "2 changes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// capital upper-cases the first letter of an ASCII phrase.
func capital(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
