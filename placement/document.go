package placement

// Document returns the text of document doc of file (numbered as spans cuts it), without its
// separator line; nil when the file has no such document.
func Document(file []byte, doc int) []byte {
	s := spans(file)
	if doc < 0 || doc >= len(s) {
		return nil
	}
	return file[s[doc].start:s[doc].end]
}

// ReplaceDocument returns file with document doc's text replaced by body (which ends in a line
// break), its separator and every other byte kept; file itself when it has no such document.
func ReplaceDocument(file []byte, doc int, body []byte) []byte {
	s := spans(file)
	if doc < 0 || doc >= len(s) {
		return file
	}
	out := make([]byte, 0, len(file)-(s[doc].end-s[doc].start)+len(body))
	out = append(out, file[:s[doc].start]...)
	out = append(out, body...)
	return append(out, file[s[doc].end:]...)
}
