package pullrequest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// prodSummary is a typical batch: three kinds, two authors, one of them twice.
func prodSummary() Summary {
	return Summary{
		Destination: "team-a/mirror", Target: "main", Head: "gitops-reverser/team-a-mirror", Folder: "clusters/prod",
		Changes: map[Change]int{
			{Kind: "Secret", Op: ChangeDelete}:     1,
			{Kind: "ConfigMap", Op: ChangeUpdate}:  7,
			{Kind: "ConfigMap", Op: ChangeCreate}:  2,
			{Kind: "Deployment", Op: ChangeUpdate}: 2,
			{Kind: "Service", Op: ChangeCreate}:    0, // counted nothing: no row
		},
		Authors: []string{"Alice <alice@example.com>", "Bob <bob@example.com>", "Alice <alice@example.com>"},
		Oldest:  time.Date(2026, 11, 25, 11, 0, 0, 0, time.FixedZone("CET", 3600)),
		Commits: 4,
	}
}

// TestDescribeRendersTheSummary pins the whole text of a typical request.
func TestDescribeRendersTheSummary(t *testing.T) {
	title, body := Describe(prodSummary())
	if want := "gitops-reverser: 12 changes in clusters/prod (team-a/mirror)"; title != want {
		t.Errorf("title %q, want %q", title, want)
	}
	want := "12 changes from the cluster, mirrored by `team-a/mirror` into `clusters/prod`, waiting to be merged into `main`.\n" +
		"\n" +
		"| Kind | create | update | delete |\n" +
		"| --- | ---: | ---: | ---: |\n" +
		"| `ConfigMap` | 2 | 7 |  |\n" +
		"| `Deployment` |  | 2 |  |\n" +
		"| `Secret` |  |  | 1 |\n" +
		"| **total** | **2** | **9** | **1** |\n" +
		"\n" +
		"4 commits by:\n" +
		"- `Alice <alice@example.com>`\n" +
		"- `Bob <bob@example.com>`\n" +
		"\n" +
		"Oldest change waiting since 2026-11-25 10:00 UTC.\n" +
		"\n" +
		"---\n" +
		"The branch `gitops-reverser/team-a-mirror` is owned by gitops-reverser: it is rebuilt whenever `main` moves, " +
		"so a commit pushed to it is lost. Do not push to it; merge this request to deliver the changes.\n"
	if body != want {
		t.Errorf("body:\n%s\nwant:\n%s", body, want)
	}
}

// TestDescribeIsTheSameForTheSameSummary shows the text does not depend on map order or on when
// it is rendered.
func TestDescribeIsTheSameForTheSameSummary(t *testing.T) {
	title, body := Describe(prodSummary())
	for range 20 {
		if t2, b2 := Describe(prodSummary()); t2 != title || b2 != body {
			t.Fatalf("a second rendering differs:\n%s\n%s", t2, b2)
		}
	}
}

// TestDescribeShapes covers the variants of a summary.
func TestDescribeShapes(t *testing.T) {
	many := make([]string, 60)
	for i := range many {
		many[i] = fmt.Sprintf("Author %02d <a%02d@example.com>", i, i)
	}
	tests := []struct {
		name      string
		s         Summary
		title     string
		has, hasn []string // parts the body must and must not have
	}{
		{"one change, no folder", Summary{Destination: "ns/d", Target: "main", Head: "h", Changes: map[Change]int{{"configmaps", ChangeCreate}: 1}, Commits: 1},
			"gitops-reverser: 1 change (ns/d)",
			[]string{"1 change from the cluster, mirrored by `ns/d`, waiting", "| `configmaps` | 1 |", "1 commit.\n"},
			[]string{"Oldest", "by:"}},
		{"other operations come after delete", Summary{Target: "main", Head: "h", Changes: map[Change]int{{"A", "rename"}: 1, {"A", ChangeDelete}: 2}},
			"gitops-reverser: 3 changes",
			[]string{"| Kind | delete | rename |", "| `A` | 2 | 1 |", "mirrored by (none)"}, nil},
		{"authors are capped", Summary{Target: "main", Head: "h", Authors: many, Commits: 80},
			"gitops-reverser: 0 changes",
			[]string{"80 commits by:", "- `Author 49 <a49@example.com>`\n- … and 10 more\n"},
			[]string{"Author 50"}},
		{"names cannot inject markdown or mentions", Summary{Destination: "ns/d", Target: "main", Head: "h", Folder: "a\nb|c",
			Changes: map[Change]int{{"Bad|Kind`", ChangeUpdate}: 1}, Authors: []string{"@org/team <x@example.com>", "`rm` <y@example.com>"}},
			"gitops-reverser: 1 change in a b|c (ns/d)",
			[]string{"- `@org/team <x@example.com>`", "- `'rm' <y@example.com>`", "| `Bad\\|Kind'` |", "into `a b\\|c`"},
			[]string{"a\nb"}},
		{"a long folder is clipped in the title", Summary{Target: "main", Head: "h", Folder: strings.Repeat("f", 300)},
			"gitops-reverser: 0 changes in " + strings.Repeat("f", maxTitleFields-1) + "…", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			title, body := Describe(tt.s)
			if title != tt.title {
				t.Errorf("title %q, want %q", title, tt.title)
			}
			for _, part := range tt.has {
				if !strings.Contains(body, part) {
					t.Errorf("body lacks %q:\n%s", part, body)
				}
			}
			for _, part := range tt.hasn {
				if strings.Contains(body, part) {
					t.Errorf("body has %q:\n%s", part, body)
				}
			}
		})
	}
}

// TestDescribeCapsTheBody shows a summary of thousands of kinds with long names still gives a
// body within GitHub's limit, that says how many kinds it left out and keeps the ownership note.
func TestDescribeCapsTheBody(t *testing.T) {
	changes := map[Change]int{}
	for i := range 5000 {
		changes[Change{Kind: fmt.Sprintf("Kind%04d%s", i, strings.Repeat("x", 300)), Op: ChangeCreate}] = 1
	}
	_, body := Describe(Summary{Destination: "ns/d", Target: "main", Head: "h", Changes: changes, Commits: 1})
	if len(body) > maxBodyBytes {
		t.Errorf("body of %d bytes, want at most %d", len(body), maxBodyBytes)
	}
	if !strings.Contains(body, " more kinds |\n| **total** | **5000** |") || !strings.HasSuffix(body, "deliver the changes.\n") {
		t.Errorf("capped body lacks the count of kinds left out, the total or the ownership note:\n%s", body[len(body)-600:])
	}
}
