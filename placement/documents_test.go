package placement

import (
	"testing"
)

// TestRemoveDocument removes each document of files with and without a leading separator: the
// others stay byte for byte, no empty document or double separator is left, and the last one
// with content removed leaves nil.
func TestRemoveDocument(t *testing.T) {
	three := "# web\na: 1\n---\nb: 2 # two\n---\n# c\nc: 3\n"
	led := "---\na: 1\n---\nb: 2\n"
	tests := []struct {
		name, file string
		doc        int
		want       string
		deleted    bool
	}{
		{name: "First", file: three, doc: 0, want: "b: 2 # two\n---\n# c\nc: 3\n"},
		{name: "Middle", file: three, doc: 1, want: "# web\na: 1\n---\n# c\nc: 3\n"},
		{name: "Last", file: three, doc: 2, want: "# web\na: 1\n---\nb: 2 # two\n"},
		{name: "FirstAfterASeparator", file: led, doc: 0, want: "---\nb: 2\n"},
		{name: "LastAfterASeparator", file: led, doc: 1, want: "---\na: 1\n"},
		{name: "Only", file: "a: 1\n", doc: 0, deleted: true},
		{name: "OnlyWithContent", file: "# header\n---\na: 1\n", doc: 1, deleted: true},
		{name: "AfterAnEndMarker", file: "a: 1\n...\n---\nb: 2\n...\n", doc: 1, want: "a: 1\n...\n"},
		{name: "OutOfRange", file: three, doc: 3, want: three},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RemoveDocument([]byte(tt.file), tt.doc)
			switch {
			case tt.deleted && got != nil:
				t.Errorf("got %q, want nil: the file has no document left", got)
			case !tt.deleted && string(got) != tt.want:
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAppendDocument appends a document after a separator, adding the newline a file's last
// line lacks.
func TestAppendDocument(t *testing.T) {
	body := "kind: ConfigMap\n"
	tests := []struct{ name, file, want string }{
		{"Empty", "", body},
		{"Blank", "\n\n", body},
		{"AfterANewline", "a: 1\n", "a: 1\n---\n" + body},
		{"WithoutALastNewline", "a: 1", "a: 1\n---\n" + body},
		{"AfterATrailingSeparator", "a: 1\n---\n", "a: 1\n---\n" + body},
		{"AfterAComment", "# only a comment\n", "# only a comment\n---\n" + body},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendDocument([]byte(tt.file), []byte(body))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	file := fixture(t, "app.yaml")
	out := AppendDocument(file, []byte(body))
	if objs := objects(t, out); len(objs) != 4 || objs[3]["kind"] != "ConfigMap" {
		t.Errorf("the appended document reads as %v", objs)
	}
}
