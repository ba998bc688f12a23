package gitops

import (
	"testing"

	"github.com/configbutler/gitops-reverser/testenv"
)

// hostileName is a name no Git would write: it holds the delimiters of the email.
const hostileName = `<script>alert(1)</script> "><img src=x onerror=alert(1)>`

// TestCleanSignature: Clean removes what Git forbids in an ident and trims the crud Git trims,
// and leaves ordinary names and emails as they are.
func TestCleanSignature(t *testing.T) {
	tests := []struct {
		name     string
		in, want Signature
	}{
		{"plain", Signature{"Alice Example", "alice@example.com"}, Signature{"Alice Example", "alice@example.com"}},
		{"unicode", Signature{"Zoë O’Neil 山田太郎", "zoë@例え.jp"}, Signature{"Zoë O’Neil 山田太郎", "zoë@例え.jp"}},
		{"inner spaces and quotes", Signature{"Pat  \"the cat\" O'Doe", "pat@example.com"}, Signature{"Pat  \"the cat\" O'Doe", "pat@example.com"}},
		{"trailing dot kept", Signature{"Pat Doe Jr.", "pat@example.com"}, Signature{"Pat Doe Jr.", "pat@example.com"}},
		{"no name", Signature{"", "anon@example.com"}, Signature{"", "anon@example.com"}},
		{"no email", Signature{"Alice", ""}, Signature{"Alice", ""}},
		{"zero", Signature{}, Signature{}},
		{"crud at the ends", Signature{" \t\"Alice\";, ", " <alice@example.com>: "}, Signature{"Alice", "alice@example.com"}},
		{"delimiters inside", Signature{hostileName, "xss<@>example.com"}, Signature{`scriptalert(1)/script "img src=x onerror=alert(1)`, "xss@example.com"}},
		{"line breaks and NUL", Signature{"Al\nice\r\x00 Doe", "a\nb@example.com\x00"}, Signature{"Alice Doe", "ab@example.com"}},
		{"only crud", Signature{` <>"'; `, "<>"}, Signature{}},
		{"bytes that are not UTF-8 kept", Signature{"Al\xffice", "a@example.com"}, Signature{"Al\xffice", "a@example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Clean(); got != tt.want {
				t.Errorf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := tt.want.Clean(); got != tt.want {
				t.Errorf("Clean is not idempotent: Clean(%q) = %q", tt.want, got)
			}
		})
	}
}

// TestHostileAuthorIsWrittenAsAValidIdent: whatever author a change is credited to, the commit
// the worker writes passes git fsck --strict and names that author cleaned, name and email
// apart; an author with nothing left once cleaned is the bot.
func TestHostileAuthorIsWrittenAsAValidIdent(t *testing.T) {
	srv := MustGitServer(t)
	w := StartWorker(t, MustRepo(t, srv, "idents"), "", BatchLimits{})
	MustEnqueue(t, w,
		Change{Path: cmPath("a"), Content: configMap("a", "1", 100), Summary: "update configmaps/default/a",
			Credit: Credit{Author: Signature{Name: hostileName + "\n", Email: " <xss@example.com> "}}},
		Change{Path: cmPath("b"), Content: configMap("b", "1", 100), Summary: "update configmaps/default/b",
			Credit: Credit{Author: Signature{Name: "Zoë O’Neil", Email: "zoe@example.com"}}},
		Change{Path: cmPath("c"), Content: configMap("c", "1", 100), Summary: "update configmaps/default/c",
			Credit: Credit{Author: Signature{Name: "<>", Email: "\n"}}},
	)
	MustFlush(t, w)
	testenv.MustFsck(t, srv, "idents")
	var got []string
	for _, c := range testenv.MustLog(t, srv, "idents") { // newest first
		got = append(got, c.Subject+": "+c.AuthorName+"|"+c.AuthorEmail)
	}
	want := []string{
		"update configmaps/default/c: gitops-reverser|bot@configbutler.ai",
		"update configmaps/default/b: Zoë O’Neil|zoe@example.com",
		`update configmaps/default/a: scriptalert(1)/script "img src=x onerror=alert(1)|xss@example.com`,
	}
	if len(got) != len(want) {
		t.Fatalf("commits = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("commit %d = %q, want %q", i, got[i], want[i])
		}
	}
}
