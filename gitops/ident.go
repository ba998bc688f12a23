package gitops

import "strings"

// Clean returns the signature as Git itself would write it in an author or committer line, so
// that a name can never spill into the email or break the line. Name and email are each cleaned
// the way Git's ident code cleans them: the "crud" at both ends (spaces and control characters,
// commas, colons, semicolons, quotes, backslashes, '<' and '>') is trimmed, and '<', '>', line
// breaks and NUL are removed everywhere. Everything else, unicode included, is kept, and so is a
// dot: Git stopped trimming dots in 2.42, so that "Pat Doe Jr." keeps its own.
//
// Clean invents nothing: a name or email that is empty after cleaning stays empty (an ident
// with an empty name or email is still one git fsck accepts), and an email is not judged as an
// address, as Git does not judge it. A signature that cleans to zero credits nobody: the worker commits it as the bot.
func (s Signature) Clean() Signature {
	return Signature{Name: cleanIdent(s.Name), Email: cleanIdent(s.Email)}
}

// cleanIdent trims the crud at the ends of s, then removes the delimiters of an ident line.
// Every byte it removes inside is crud as well, so what is left never starts or ends with crud.
func cleanIdent(s string) string {
	start, end := 0, len(s)
	for start < end && identCrud(s[start]) {
		start++
	}
	for end > start && identCrud(s[end-1]) {
		end--
	}
	s = s[start:end]
	if !strings.ContainsAny(s, identDelimiters) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := range len(s) { // bytewise: bytes that are not UTF-8 are kept as they are, as Git keeps them
		if strings.IndexByte(identDelimiters, s[i]) < 0 {
			b = append(b, s[i])
		}
	}
	return string(b)
}

// identDelimiters are the bytes an ident may not hold anywhere: '<' and '>' enclose the email,
// a line break ends the header line and NUL ends Git's C strings.
const identDelimiters = "<>\n\r\x00"

// identCrud reports whether Git trims byte c from the ends of a name or email. The bytes of a
// multi-byte UTF-8 character are all above 0x7f, so a unicode name is never cut.
func identCrud(c byte) bool {
	switch c {
	case ',', ':', ';', '<', '>', '"', '\\', '\'':
		return true
	}
	return c <= ' '
}
