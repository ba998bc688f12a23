package placement

import (
	"bytes"
)

// RemoveDocument is file without document doc (numbered as Edit numbers them) and its separator
// line; nil when no other document has content (the caller deletes the file). Every other
// document and separator stays byte for byte. When the first document has no separator of its
// own, the separator of the next one goes with it, so that the file does not open with an
// empty document.
func RemoveDocument(file []byte, doc int) []byte {
	all := spans(file)
	if doc < 0 || doc >= len(all) {
		return file
	}
	from, to := all[doc].sep, len(file)
	if doc+1 < len(all) {
		to = all[doc+1].sep
	}
	if from < 0 {
		from = 0
		if doc+1 < len(all) {
			to = all[doc+1].start
		}
	}
	out := append(append([]byte(nil), file[:from]...), file[to:]...)
	for _, s := range spans(out) {
		if hasContent(out[s.start:s.end]) {
			return out
		}
	}
	return nil
}

// AppendDocument is file with body, the YAML of one object, added as its last document after a
// separator line (and a newline ending the file's last line, if it had none); body alone when
// the file is empty. A file written with CRLF gets body with CRLF.
func AppendDocument(file, body []byte) []byte {
	if len(bytes.TrimSpace(file)) == 0 {
		return body
	}
	nl := "\n"
	if crlf(file) {
		nl = "\r\n"
		body = toCRLF(body)
	}
	out := append([]byte(nil), file...)
	if out[len(out)-1] != '\n' {
		out = append(out, nl...)
	}
	all := spans(file)
	if last := all[len(all)-1]; last.sep < 0 || hasContent(file[last.start:last.end]) {
		out = append(out, "---"+nl...)
	}
	return append(out, body...)
}

// hasContent reports whether a document's text holds more than blank and comment lines.
func hasContent(text []byte) bool {
	for _, line := range bytes.Split(text, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return true
		}
	}
	return false
}

// crlf reports whether text ends its lines with CRLF: it has lines, and each ends so.
func crlf(text []byte) bool {
	lf := bytes.Count(text, []byte("\n"))
	return lf > 0 && lf == bytes.Count(text, []byte("\r\n"))
}

// toCRLF ends with CRLF every line of text that ends with LF.
func toCRLF(text []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(text, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
}
