package sanitize

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// renderer builds the node tree of one document. A collection nested flowDepth levels deep is
// not built as nodes at all: it is written as JSON, which is YAML in flow style (YAML 1.2 reads
// every JSON text), on one line, with sorted keys, and stands in the tree as a placeholder until
// the document is encoded. Building and emitting yaml.v3 nodes for thousands of levels costs
// tens of MiB of stack and heap; encoding/json walks the same subtree for a few.
type renderer struct {
	nonce string   // makes placeholders impossible to meet in real content
	flows [][]byte // JSON of each flow subtree, by placeholder index
}

// flow records v's JSON and returns its placeholder, a plain scalar.
func (r *renderer) flow(v any) (*yaml.Node, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // <, > and & are fine in YAML; keep them readable
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode deep subtree: %w", err)
	}
	if r.nonce == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		r.nonce = hex.EncodeToString(b)
	}
	r.flows = append(r.flows, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return scalar("!!str", r.placeholder(len(r.flows)-1)), nil
}

func (r *renderer) placeholder(i int) string { return fmt.Sprintf("flow%s-%d", r.nonce, i) }

// substitute puts each flow subtree's JSON where its placeholder was emitted.
func (r *renderer) substitute(doc []byte) []byte {
	if len(r.flows) == 0 {
		return doc
	}
	for i, flow := range r.flows {
		doc = bytes.Replace(doc, []byte(r.placeholder(i)), flow, 1)
	}
	return doc
}
