package webhook

import "errors"

// maxObjectDepth is how deeply an admitted object may nest, its own braces being level 1, and still
// be attributed. Kubernetes objects are rarely deeper than ~40 levels and the deepest CRD schemas
// (a pod template inside an openAPIV3Schema, inside a CRD version) reach ~60-80, so 100 attributes
// every real object. Only a custom resource with preserved unknown fields nests deeper, up to the
// apiserver's own limit of 10,000 levels; decoding, sanitizing and rendering cost a map, a stack frame
// and YAML nodes for each level, and three such 54 KB reviews once took 906 MB. A deeper object is
// allowed unattributed: the watch still mirrors it, credited to the bot.
const maxObjectDepth = 100

// errTooDeep is why an object nested deeper than maxObjectDepth is not recorded.
var errTooDeep = errors.New("object too deeply nested to attribute (the watch still mirrors it, credited to the bot)")

// jsonDepth is the deepest nesting of objects and arrays in the JSON text data: 0 for a scalar, 1 for
// {} or [], 2 for {"a":[]}. Brackets inside strings, escaped quotes included, do not count. It reads
// data once, without recursion or allocation, so it costs the same at any depth, unlike a decoder,
// which spends a stack frame and a container on each level. On malformed input the result means
// nothing, but it never panics.
func jsonDepth(data []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case escaped: // the character after a backslash in a string, never its end
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
