package placement

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// AddResource appends entry, a path relative to the kustomization's folder, to the resources:
// of the kustomization file kustomization, and returns the file with every other byte as it
// was: comments, order, quoting and line endings. The new item is written as the list writes
// its last item (its indentation, the space after its dash, its quotes); a kustomization
// without resources, or with `resources: []` or an empty `resources:`, gets a block list under
// the key, indented as the file's other block lists are (flush left, as `kustomize edit add`
// writes, when it has none), the key itself at the end of the file when absent. When entry is
// already listed (./x and x are one entry) the same bytes come back.
func AddResource(kustomization []byte, entry string) ([]byte, error) {
	if err := checkEntry(entry); err != nil {
		return nil, err
	}
	l, err := readResources(kustomization)
	if err != nil {
		return nil, fmt.Errorf("add %s to resources: %w", entry, err)
	}
	if l.index(entry) >= 0 {
		return kustomization, nil
	}
	switch {
	case l.value == nil:
		return l.appendKey(entry), nil
	case l.value.Kind == yaml.ScalarNode || len(l.value.Content) == 0:
		return l.startList(entry)
	case l.value.Style&yaml.FlowStyle != 0:
		return l.addFlow(entry)
	}
	return l.addBlock(entry)
}

// RemoveResource removes entry (./x and x are one entry) from the resources: of the
// kustomization file kustomization: the item's line, and only that line, so a comment on the
// line above stays; `resources: []` when it was the last. Every other byte is kept. When entry
// is not listed the same bytes come back; when it is listed more than once, every listing goes.
func RemoveResource(kustomization []byte, entry string) ([]byte, error) {
	if err := checkEntry(entry); err != nil {
		return nil, err
	}
	out := kustomization
	for {
		l, err := readResources(out)
		if err != nil {
			return nil, fmt.Errorf("remove %s from resources: %w", entry, err)
		}
		i := l.index(entry)
		if i < 0 {
			return out, nil
		}
		if out, err = l.remove(i); err != nil {
			return nil, fmt.Errorf("remove %s from resources: %w", entry, err)
		}
	}
}

// checkEntry refuses an entry that cannot be one item of resources: empty, or of several lines.
func checkEntry(entry string) error {
	if strings.TrimSpace(entry) == "" || strings.ContainsAny(entry, "\r\n") {
		return fmt.Errorf("resource entry %q: want a path on one line", entry)
	}
	return nil
}

// resourceList is a kustomization file with the nodes of its resources: list, read so that
// the list can be changed by splicing lines.
type resourceList struct {
	fileLines
	root  *yaml.Node // the top mapping; nil for a file of no document
	key   *yaml.Node // the resources key; nil when absent
	value *yaml.Node // its value: a sequence, or a null scalar
}

func readResources(data []byte) (*resourceList, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read the kustomization: %w", err)
	}
	l := &resourceList{fileLines: newFileLines(data)}
	if len(doc.Content) == 0 {
		return l, nil
	}
	if l.root = doc.Content[0]; l.root.Kind != yaml.MappingNode {
		return nil, errors.New("the kustomization is not a mapping")
	}
	for i := 0; i+1 < len(l.root.Content); i += 2 {
		if l.root.Content[i].Value == "resources" {
			l.key, l.value = l.root.Content[i], l.root.Content[i+1]
		}
	}
	if l.value != nil {
		if err := checkResourcesValue(l.value); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// checkResourcesValue refuses a resources value that is not a list of strings or empty.
func checkResourcesValue(v *yaml.Node) error {
	if v.Kind != yaml.SequenceNode && (v.Kind != yaml.ScalarNode || v.Tag != "!!null") {
		return fmt.Errorf("resources (line %d) is not a list", v.Line)
	}
	if slices.ContainsFunc(v.Content, func(n *yaml.Node) bool { return n.Kind != yaml.ScalarNode }) {
		return fmt.Errorf("resources (line %d) holds an item that is not a string", v.Line)
	}
	return nil
}

// index is the place of entry in the list, or -1.
func (l *resourceList) index(entry string) int {
	if l.value == nil {
		return -1
	}
	want := sameEntry(entry)
	return slices.IndexFunc(l.value.Content, func(n *yaml.Node) bool { return sameEntry(n.Value) == want })
}

// sameEntry is the form in which two entries naming the same path are equal: cleaned, so that
// ./x, x and x/ match. A remote URL is left as written.
func sameEntry(e string) string {
	if strings.Contains(e, "://") {
		return e
	}
	return path.Clean(e)
}

// appendKey adds `resources:` with entry at the end of the file.
func (l *resourceList) appendKey(entry string) []byte {
	out := slices.Clone(l.data)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, l.eol...)
	}
	indent := ""
	if l.root != nil && len(l.root.Content) > 0 {
		indent = strings.Repeat(" ", l.root.Content[0].Column-1)
	}
	out = append(out, indent+"resources:"+l.eol...)
	return append(out, indent+l.newItemIndent()+"- "+itemText(entry, 0, false)+l.eol...)
}

// startList replaces an empty resources value (nothing, ~ or []) with a block list of entry.
func (l *resourceList) startList(entry string) ([]byte, error) {
	start := l.offset(l.value.Line, l.value.Column)
	end := start + len(l.value.Value)
	if l.value.Kind == yaml.SequenceNode {
		close, err := l.closingBracket(start)
		if err != nil {
			return nil, err
		}
		end = close + 1
	}
	for start > 0 && (l.data[start-1] == ' ' || l.data[start-1] == '\t') && end > start {
		start--
	}
	lineEnd := l.lineEnd(l.lineOf(end))
	indent := strings.Repeat(" ", l.key.Column-1) + l.newItemIndent()
	item := indent + "- " + itemText(entry, 0, false)
	var out []byte
	out = append(out, l.data[:start]...)
	out = append(out, l.data[end:lineEnd]...)
	out = append(out, l.lineAt(lineEnd, item)...)
	return append(out, l.data[lineEnd:]...), nil
}

// addBlock adds entry after the last item of a block list, written as that item is.
func (l *resourceList) addBlock(entry string) ([]byte, error) {
	last := l.value.Content[len(l.value.Content)-1]
	lineStart := l.lines[last.Line-1]
	prefix := string(l.data[lineStart:l.offset(last.Line, last.Column)])
	if strings.TrimSpace(prefix) != "-" {
		return nil, fmt.Errorf("resources' item on line %d does not start its line", last.Line)
	}
	at := l.lineEnd(l.itemEnd(last))
	return spliced(l.data, at, at, l.lineAt(at, prefix+itemText(entry, last.Style, false))), nil
}

// addFlow adds entry after the last item of a flow list ([a, b]).
func (l *resourceList) addFlow(entry string) ([]byte, error) {
	last := l.value.Content[len(l.value.Content)-1]
	at := l.scalarEnd(l.offset(last.Line, last.Column))
	return spliced(l.data, at, at, []byte(", "+itemText(entry, last.Style, true))), nil
}

// remove takes the i-th item out of the list.
func (l *resourceList) remove(i int) ([]byte, error) {
	items := l.value.Content
	if l.value.Style&yaml.FlowStyle != 0 {
		start := l.offset(items[i].Line, items[i].Column)
		end := l.scalarEnd(start)
		switch {
		case i+1 < len(items):
			end = l.offset(items[i+1].Line, items[i+1].Column)
		case i > 0:
			start = l.scalarEnd(l.offset(items[i-1].Line, items[i-1].Column))
		}
		return spliced(l.data, start, end, nil), nil
	}
	start, end := l.lines[items[i].Line-1], l.lineEnd(l.itemEnd(items[i]))
	if end == len(l.data) && !strings.HasSuffix(string(l.data), "\n") && start > 0 {
		start = l.lines[items[i].Line-2] + len(strings.TrimRight(string(l.data[l.lines[items[i].Line-2]:start]), "\r\n"))
	}
	if len(items) > 1 {
		return spliced(l.data, start, end, nil), nil
	}
	colon, err := l.colonAfter(l.key)
	if err != nil {
		return nil, err
	}
	out := spliced(l.data, start, end, nil)
	return spliced(out, colon+1, colon+1, []byte(" []")), nil
}

// newItemIndent is how far a new block list is indented under its key: as the file's first
// other block list is, or not at all.
func (l *resourceList) newItemIndent() string {
	if l.root == nil {
		return ""
	}
	for i := 0; i+1 < len(l.root.Content); i += 2 {
		k, v := l.root.Content[i], l.root.Content[i+1]
		if v.Kind == yaml.SequenceNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 && v.Column > k.Column {
			return strings.Repeat(" ", v.Column-k.Column)
		}
	}
	return ""
}

// itemText writes entry as an item of a list whose last item has style; flow says the list is
// a flow list, where a plain item cannot hold , [ ] { }.
func itemText(entry string, style yaml.Style, flow bool) string {
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		return strconv.Quote(entry)
	case style&yaml.SingleQuotedStyle != 0:
		return "'" + strings.ReplaceAll(entry, "'", "''") + "'"
	}
	out, err := yaml.Marshal(entry)
	plain := strings.TrimSuffix(string(out), "\n")
	if err != nil || strings.Contains(plain, "\n") || flow && strings.ContainsAny(plain, ",[]{}") {
		return strconv.Quote(entry)
	}
	return plain
}
