package notify

import (
	"strconv"
	"strings"
	"testing"
)

// TestASummaryNeverShowsASecretsValue: a proposal's diff summarized for a message keeps what
// changed and hides every value that may be secret, however the YAML writes it.
func TestASummaryNeverShowsASecretsValue(t *testing.T) {
	cases := []struct {
		name, kind, diff string
		want             []string // lines of the summary
		never            []string // values that must not appear
	}{
		{"a ConfigMap's plain change is shown", "ConfigMap",
			"--- a\n+++ b\n@@ -1,2 +1,2 @@\n data:\n-  colour: blue\n+  colour: green\n",
			[]string{"-  colour: blue", "+  colour: green"}, nil},
		{"a ConfigMap key named password", "ConfigMap",
			" data:\n-  password: hunter2\n+  password: s3cret\n",
			[]string{"-  password: (hidden)", "+  password: (hidden)"}, []string{"hunter2", "s3cret"}},
		{"a flow mapping holding a password", "ConfigMap",
			"+data: {db_password: s3cret, colour: green}\n",
			[]string{"+data: (hidden)"}, []string{"s3cret"}},
		{"a block scalar under a token key, its key line unchanged", "ConfigMap",
			" data:\n   api-token: |\n-    old-value-1\n+    new-value-2\n",
			[]string{"-    (hidden)", "+    (hidden)"}, []string{"old-value-1", "new-value-2"}},
		{"a nested mapping under an auth key", "ConfigMap",
			"+  auth:\n+    user: admin\n+    pass: hunter2\n+  colour: green\n",
			[]string{"+  auth: (hidden)", "+    (hidden)", "+    (hidden)", "+  colour: green"}, []string{"admin", "hunter2"}},
		{"every value of a Secret", "Secret",
			" stringData:\n-  colour: blue\n+  colour: green\n+  - item\n",
			[]string{"-  (hidden)", "+  (hidden)", "+  (hidden)"}, []string{"blue", "green", "item", "colour"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.kind, tc.diff)
			if want := strings.Join(tc.want, "\n"); got != want {
				t.Errorf("summary:\n%s\nwant:\n%s", got, want)
			}
			for _, v := range tc.never {
				if strings.Contains(got, v) {
					t.Errorf("the summary shows %q:\n%s", v, got)
				}
			}
		})
	}
}

// TestALongDiffIsCut: a summary holds at most maxDiffLines changed lines and says how many more.
func TestALongDiffIsCut(t *testing.T) {
	var b strings.Builder
	for i := range 25 {
		b.WriteString("+  key" + strconv.Itoa(i) + "x: v\n")
	}
	got := strings.Split(Summarize("ConfigMap", b.String()), "\n")
	if len(got) != maxDiffLines+1 || got[maxDiffLines] != "… 5 more changed lines" {
		t.Errorf("summary of 25 lines: %d lines, last %q", len(got), got[len(got)-1])
	}
}
