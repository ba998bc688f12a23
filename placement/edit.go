package placement

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Edit applies ops to document number doc of file (numbered as spans cuts the file) and returns
// the new file. It changes the document's bytes only where the ops change a value: a scalar's
// token is replaced in its line (its comment and the rest of the line stay), keys and list items
// are added after their siblings in the list's own style and removed with their lines, and a
// mapping or list set as a whole is edited key by key and item by item (named lists matched by
// key). Every other byte of the file, other documents and separators included, comes back as it
// was.
//
// The result is checked before it is returned: the edited document must parse and read back as
// the original with the ops applied, and nothing else changed; otherwise Edit returns an error
// and no file. It refuses to edit through anchors, aliases and merge keys, and into scalars.
func Edit(file []byte, doc int, ops []Op) ([]byte, error) {
	all := spans(file)
	if doc < 0 || doc >= len(all) {
		return nil, fmt.Errorf("document %d: the file has %d documents", doc, len(all))
	}
	s := all[doc]
	text, crlfFile := file[s.start:s.end], crlf(file)
	if crlfFile { // edited as LF, written back as CRLF
		text = bytes.ReplaceAll(text, []byte("\r\n"), []byte("\n"))
	}
	d := &document{number: doc, firstLine: bytes.Count(file[:s.start], []byte("\n"))}
	d.reset(text)
	edited, err := d.edit(ops)
	if err != nil {
		return nil, err
	}
	if crlfFile {
		edited = toCRLF(edited)
	}
	out := make([]byte, 0, len(file)+len(edited)-(s.end-s.start))
	out = append(out, file[:s.start]...)
	out = append(out, edited...)
	out = append(out, file[s.end:]...)
	if len(spans(out)) != len(all) {
		return nil, fmt.Errorf("document %d: %w: a line of it would read as a document separator", doc, errReadBack)
	}
	return out, nil
}

// document is the text of the document being edited, re-read after each change, and its place
// in the file for messages.
type document struct {
	number     int // the document's number in the file
	firstLine  int // how many lines of the file come before the document
	text       []byte
	lines      []int // where each line of text starts
	listIndent int   // how far the document indents a block list under its key: 0 flush-left
	quoteLines bool  // write strings of several lines double-quoted, never as literal blocks
	// parsed is the root parse read from parsedText, reused while text is the same: an edit's
	// first step reads what the edit's start read.
	parsed     *yaml.Node
	parsedText []byte
}

// edit applies ops to the document and returns its new text, checked. When the text does not
// read back as it should, it is edited again with strings of several lines double-quoted: a
// literal block takes in the more indented comment lines that may follow it.
func (d *document) edit(ops []Op) ([]byte, error) {
	original := d.text
	out, err := d.editOnce(ops)
	if errors.Is(err, errReadBack) && !d.quoteLines {
		d.reset(original)
		d.quoteLines = true
		return d.editOnce(ops)
	}
	return out, err
}

// editOnce is edit without the second try.
func (d *document) editOnce(ops []Op) ([]byte, error) {
	root, err := d.parse()
	if err != nil {
		return nil, err
	}
	want, err := valueOf(root)
	if err != nil {
		return nil, d.errorf(root, nil, "%w", err)
	}
	normal := make([]Op, len(ops))
	for i, op := range ops {
		if normal[i], err = normalOp(op); err != nil {
			return nil, fmt.Errorf("document %d: %s: %w", d.number, op.Path, err)
		}
	}
	d.listIndent = listIndentOf(root)
	for _, op := range normal {
		if err := d.run(edit{Op: op}); err != nil {
			return nil, err
		}
	}
	for _, op := range normal { // after the edit, whose errors name the line
		if want, err = applyOp(want, op); err != nil {
			return nil, fmt.Errorf("document %d: %s: %w", d.number, op.Path, err)
		}
	}
	if err := d.check(want, normal); err != nil {
		return nil, err
	}
	return d.text, nil
}

// run applies one edit and every finer edit it is made of, depth first.
func (d *document) run(first edit) error {
	queue := []edit{first}
	for len(queue) > 0 {
		e := queue[0]
		more, err := d.apply(e)
		if err != nil {
			return err
		}
		queue = append(more, queue[1:]...)
	}
	return nil
}

// parse reads the document's current text; its root must be a mapping.
func (d *document) parse() (*yaml.Node, error) {
	if d.parsed != nil && bytes.Equal(d.parsedText, d.text) {
		return d.parsed, nil
	}
	root, err := d.parseText()
	if err == nil {
		d.parsed, d.parsedText = root, bytes.Clone(d.text) // a copy: the text may change in place
	}
	return root, err
}

// parseText reads the document's current text; its root must be a mapping.
func (d *document) parseText() (*yaml.Node, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(d.text, &n); err != nil {
		return nil, fmt.Errorf("document %d does not parse: %w", d.number, d.fileLines(err))
	}
	if n.Kind != yaml.DocumentNode || len(n.Content) != 1 {
		return nil, fmt.Errorf("document %d (after line %d) is empty", d.number, d.firstLine)
	}
	root := n.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, d.errorf(root, nil, "the document is a %s, not a mapping", root.ShortTag())
	}
	return root, nil
}

// check parses the edited text and compares what it reads with want, the original object with
// ops applied.
func (d *document) check(want any, ops []Op) error {
	root, err := d.parse()
	if err != nil {
		return fmt.Errorf("%w: %w", errReadBack, err)
	}
	got, err := valueOf(root)
	if err != nil {
		return d.errorf(root, nil, "%w: %w", errReadBack, err)
	}
	if equal(got, want) {
		return nil
	}
	for _, op := range ops {
		g, gok := ValueAt(got, op.Path)
		w, wok := ValueAt(want, op.Path)
		if gok != wok || !equal(g, w) {
			return fmt.Errorf("document %d: %s: %w (%v, want %v)", d.number, op.Path, errReadBack, g, w)
		}
	}
	return fmt.Errorf("document %d: %w: a value no op names would change", d.number, errReadBack)
}

// fileLines is a yaml.v3 error whose "line N", counted in the document, is counted in the
// file instead.
func (d *document) fileLines(err error) error {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "yaml: line ")
	num, after, found := strings.Cut(rest, ":")
	n, bad := strconv.Atoi(num)
	if !ok || !found || bad != nil {
		return err
	}
	return fmt.Errorf("line %d:%s: %w", d.firstLine+n, after, errParse)
}

// errParse is the error of a document that does not parse.
var errParse = errors.New("not YAML")

// errReadBack is the error of an edit whose text does not read back as intended; the file is
// not written.
var errReadBack = errors.New("the edited document does not read back as intended")

// errorf is an error about node n at path, naming the document and the file's line.
func (d *document) errorf(n *yaml.Node, path Path, format string, args ...any) error {
	where := fmt.Sprintf("document %d, line %d", d.number, d.firstLine+n.Line)
	if len(path) > 0 {
		where += ", " + path.String()
	}
	return fmt.Errorf("%s: %w", where, fmt.Errorf(format, args...))
}

// reset makes text the document's text and indexes its lines.
func (d *document) reset(text []byte) {
	d.text = text
	d.lines = d.lines[:0]
	d.lines = append(d.lines, 0)
	for i, c := range text {
		if c == '\n' {
			d.lines = append(d.lines, i+1)
		}
	}
}

// splice is one replacement of text[from:to].
type splice struct {
	from, to int
	with     string
}

// splice applies replacements that do not overlap, last first so that offsets hold.
func (d *document) splice(all ...splice) {
	slices.SortFunc(all, func(a, b splice) int { return a.from - b.from })
	out := d.text
	for i := len(all) - 1; i >= 0; i-- {
		s := all[i]
		next := make([]byte, 0, len(out)-(s.to-s.from)+len(s.with))
		next = append(next, out[:s.from]...)
		next = append(next, s.with...)
		out = append(next, out[s.to:]...)
	}
	d.reset(out)
}
