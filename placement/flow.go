package placement

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// flowText is v in flow style on one line ({a: 1, b: [x, y]}), in place of the flow collection
// old: what v keeps of old is written as old wrote it (key order, quotes), new keys follow in
// the order new mappings get.
func flowText(old *yaml.Node, v any) (string, error) {
	n, err := flowNode(old, v)
	if err != nil {
		return "", err
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return "", fmt.Errorf("encode flow: %w", err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// flowNode is the node of v with every collection in flow style, made like old (nil when v is
// new there).
func flowNode(old *yaml.Node, v any) (*yaml.Node, error) {
	if old != nil {
		if cur, err := valueOf(old); err == nil && equal(cur, v) && old.Kind != yaml.AliasNode {
			return bare(old), nil
		}
	}
	switch x := v.(type) {
	case map[string]any:
		return flowMapping(old, x)
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i, e := range x {
			var was *yaml.Node
			if old != nil && old.Kind == yaml.SequenceNode && i < len(old.Content) {
				was = old.Content[i]
			}
			c, err := flowNode(was, e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		return n, nil
	}
	return flowScalar(old, v)
}

// flowMapping is flowNode for a mapping: old's keys that v keeps in old's order, then v's new
// keys.
func flowMapping(old *yaml.Node, m map[string]any) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	was := map[string]*yaml.Node{}
	var keys []string
	if old != nil && old.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(old.Content); i += 2 {
			if k := old.Content[i].Value; keyIn(m, k) {
				was[k] = old.Content[i+1]
				keys = append(keys, k)
			}
		}
	}
	for _, k := range ordered(m, itemOrder) {
		if was[k] == nil {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		key, err := flowScalar(nil, k)
		if err != nil {
			return nil, err
		}
		val, err := flowNode(was[k], m[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		n.Content = append(n.Content, key, val)
	}
	return n, nil
}

// flowScalar is the node of scalar v, a string in old's quotes when it can be (see quotedLike).
func flowScalar(old *yaml.Node, v any) (*yaml.Node, error) {
	text, err := inline(v)
	if s, ok := v.(string); ok && old != nil && old.Kind == yaml.ScalarNode {
		text, err = quotedLike(old.Style, s)
	}
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil {
		return nil, fmt.Errorf("encode %q: %w", text, err)
	}
	return bare(n.Content[0]), nil
}

// bare is a copy of n without comments, which a flow collection on one line cannot carry.
func bare(n *yaml.Node) *yaml.Node {
	c := *n
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, e := range n.Content {
		c.Content[i] = bare(e)
	}
	if c.Kind == yaml.MappingNode || c.Kind == yaml.SequenceNode {
		c.Style |= yaml.FlowStyle
	}
	return &c
}
