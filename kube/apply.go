package kube

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// ApplyBody is obj as the body of a server-side apply (application/apply-patch+yaml), in a form
// the apiserver reads back exactly. It reads that body as YAML, and JSON is YAML, but a YAML
// reader refuses some characters raw that JSON leaves raw (DEL, the C1 controls, U+FEFF, U+FFFE,
// U+FFFF: "control characters are not allowed") and folds NEL, a line break in YAML, into a
// space. So those are written as \u escapes, which both read as the character itself; every
// other character JSON already escapes where YAML needs it (C0 controls, U+2028, U+2029), and
// integers are written whole, as JSON numbers of their digits.
func ApplyBody(obj map[string]any) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode the apply body: %w", err)
	}
	// Such characters stand only inside JSON strings: escaping them raw keeps the JSON valid.
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		r, size := utf8.DecodeRune(raw[i:])
		if yamlRefusesRaw(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, raw[i:i+size]...)
		}
		i += size
	}
	return out, nil
}

// yamlRefusesRaw says whether a YAML reader refuses r in a double-quoted scalar, or reads it as
// something else (NEL, a line break), where JSON writes it raw.
func yamlRefusesRaw(r rune) bool {
	return r >= 0x7f && r <= 0x9f || r == 0xfeff || r == 0xfffe || r == 0xffff
}
