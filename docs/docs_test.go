// Package docs_test keeps the documentation honest: README.md stays short, every relative link of
// README.md and docs/*.md leads to a file (and heading) that exists, every page of docs/ is
// reachable from the README, and the configuration reference lists exactly the daemon's flags.
package docs_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/configbutler/gitops-reverser/daemon"
	"github.com/urfave/cli/v2"
)

// readmeMaxLines is the README's budget: a pitch, the quick start, install, a first destination
// and links; every topic has its own page in docs/.
const readmeMaxLines = 250

const (
	readme        = "../README.md"
	configuration = "configuration.md"
)

// pages returns README.md and every Markdown page of docs/.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no page in docs/")
	}
	return append([]string{readme}, docs...)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestREADMEIsShort(t *testing.T) {
	text := read(t, readme)
	lines := strings.Count(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		lines++
	}
	if lines > readmeMaxLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to a page of docs/ and link it", lines, readmeMaxLines)
	}
}

// TestRelativeLinksResolve follows every relative link of README.md and docs/*.md: the file (or
// folder) must exist, and a #fragment must name a heading of the Markdown file it points into.
func TestRelativeLinksResolve(t *testing.T) {
	anchorsOf := map[string][]string{}
	for _, page := range pages(t) {
		for _, l := range links(read(t, page)) {
			target, err := resolve(page, l)
			if err != nil {
				t.Errorf("%s: link %q: %v", page, l, err)
				continue
			}
			if target.path == "" {
				continue // an absolute URL
			}
			if _, err := os.Stat(target.path); err != nil {
				t.Errorf("%s: link %q: no such file %s", page, l, target.path)
				continue
			}
			if target.anchor == "" {
				continue
			}
			if !strings.HasSuffix(target.path, ".md") {
				t.Errorf("%s: link %q: a #fragment into a file that is not Markdown", page, l)
				continue
			}
			if _, ok := anchorsOf[target.path]; !ok {
				anchorsOf[target.path] = anchors(read(t, target.path))
			}
			if !slices.Contains(anchorsOf[target.path], target.anchor) {
				t.Errorf("%s: link %q: %s has no heading #%s (it has %v)", page, l, target.path, target.anchor, anchorsOf[target.path])
			}
		}
	}
}

// TestEveryPageIsLinkedFromREADME keeps the README the way into every page of docs/.
func TestEveryPageIsLinkedFromREADME(t *testing.T) {
	linked := map[string]bool{}
	for _, l := range links(read(t, readme)) {
		if target, err := resolve(readme, l); err == nil && target.path != "" {
			linked[absolute(t, target.path)] = true
		}
	}
	for _, page := range pages(t)[1:] {
		if !linked[absolute(t, page)] {
			t.Errorf("README.md does not link docs/%s", page)
		}
	}
}

func absolute(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestConfigurationListsExactlyTheFlags checks the configuration reference against the CLI in
// both directions: every flag has its row (key and environment variable), and every row is a
// flag. urfave/cli's own --help and --version are not settings and need no row.
func TestConfigurationListsExactlyTheFlags(t *testing.T) {
	builtIn := map[string]bool{cli.HelpFlag.Names()[0]: true, cli.VersionFlag.Names()[0]: true}
	rows := map[string]string{} // key → environment variable
	row := regexp.MustCompile("^\\| `([^`]+)` \\| `([^`]+)` \\|")
	for _, line := range strings.Split(read(t, configuration), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("%s: two rows for %s", configuration, m[1])
		}
		rows[m[1]] = m[2]
	}
	flags := map[string]bool{}
	for _, f := range daemon.Flags() {
		key := f.Names()[0]
		if builtIn[key] {
			continue
		}
		flags[key] = true
		env, ok := rows[key]
		switch {
		case !ok:
			t.Errorf("%s lacks the row of flag --%s: | `%s` | `%s` | default | meaning |", configuration, key, key, daemon.EnvVar(key))
		case env != daemon.EnvVar(key):
			t.Errorf("%s: the row of %s names the environment variable %s, the daemon reads %s", configuration, key, env, daemon.EnvVar(key))
		}
	}
	for key := range rows {
		if !flags[key] && !builtIn[key] {
			t.Errorf("%s has a row for %s, which is no flag of the daemon", configuration, key)
		}
	}
	if len(rows) == 0 {
		t.Errorf("%s has no configuration table", configuration)
	}
}

// target is where a link leads: a file relative to the test's directory (empty for an absolute
// URL) and a heading anchor.
type target struct{ path, anchor string }

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// resolve turns a link of page into the file it names, relative to the test's directory.
func resolve(page, link string) (target, error) {
	if scheme.MatchString(link) || strings.HasPrefix(link, "//") {
		return target{}, nil
	}
	ref, anchor, _ := strings.Cut(link, "#")
	ref, err := url.PathUnescape(ref)
	if err != nil {
		return target{}, fmt.Errorf("bad escape: %w", err)
	}
	if strings.HasPrefix(ref, "/") {
		return target{}, fmt.Errorf("a path from the repository's root does not work on every host: make it relative")
	}
	path := page
	if ref != "" {
		path = filepath.Join(filepath.Dir(page), ref)
	}
	return target{path: path, anchor: anchor}, nil
}

var (
	inlineLink  = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	definition  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?`)
	codeSpan    = regexp.MustCompile("`+[^`]*`+")
	heading     = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkInTitle = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// prose returns the lines of a Markdown text outside fenced code blocks.
func prose(md string) []string {
	var out []string
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		out = append(out, line)
	}
	return out
}

// links returns the targets of the inline links, images and link definitions of a Markdown text,
// leaving out code blocks and code spans. A link's text may run over several lines.
func links(md string) []string {
	var out []string
	text := codeSpan.ReplaceAllString(strings.Join(prose(md), "\n"), "")
	for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	for _, line := range strings.Split(text, "\n") {
		if m := definition.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a Markdown text: the heading's text
// lower-cased, punctuation removed, each space a hyphen, and -1, -2 … appended to repeats.
func anchors(md string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range prose(md) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(linkInTitle.ReplaceAllString(m[2], "$1"))
		if n := seen[slug]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", slug, n))
		} else {
			out = append(out, slug)
		}
		seen[slug]++
	}
	return out
}

func slugify(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
