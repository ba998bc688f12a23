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
