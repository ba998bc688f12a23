package gitedits

import (
	"strconv"
	"strings"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
)

// parseSignature reads the value of an author or committer line, "Name <email> unix-time zone",
// into a clean signature (gitops.Signature.Clean) and its time; what is malformed is left zero.
//
// The line ends with the email and the time, and the time holds no '<' or '>': the email is
// between the last '>' and the last '<' before it, and the name is everything before that '<'.
// Git itself never writes a '<' or '>' in a name, but a commit object can be written by hand, and
// splitting at the first '<' would then take the rest of the name for the email. Without a
// '<' … '>' pair the line has no email: the name is what comes before any '<' or '>'.
func parseSignature(s string) (gitops.Signature, time.Time) {
	end := strings.LastIndexByte(s, '>')
	open := strings.LastIndexByte(s[:max(end, 0)], '<')
	if end < 0 || open < 0 {
		name, _, _ := strings.Cut(s, "<")
		name, _, _ = strings.Cut(name, ">")
		return gitops.Signature{Name: name}.Clean(), time.Time{}
	}
	sig := gitops.Signature{Name: s[:open], Email: s[open+1 : end]}.Clean()
	fields := strings.Fields(s[end+1:])
	if len(fields) == 0 {
		return sig, time.Time{}
	}
	sec, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return sig, time.Time{}
	}
	when := time.Unix(sec, 0)
	if len(fields) > 1 {
		if t, err := time.Parse("-0700", fields[1]); err == nil {
			_, off := t.Zone()
			when = when.In(time.FixedZone(fields[1], off))
		}
	}
	return sig, when
}
