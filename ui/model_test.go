package ui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
)

// requestDestination is a GitDestination review of the namespace team that delivers by pull
// request, with pr as its status.pullRequest.
func requestDestination(pr *crds.PullRequestStatus) *crds.GitDestination {
	return &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "review", Namespace: "team"},
		Spec: crds.GitDestinationSpec{Branch: "main", Push: &crds.Push{Mode: crds.PushPullRequest,
			PullRequest: &crds.PullRequestPush{Provider: crds.ProviderGitHub}}},
		Status: crds.GitDestinationStatus{PullRequest: pr}}
}

// TestRequestOfLinksOnlyWebURLs: the model of a destination's pull request says whether one is
// open, and links its URL only when it is an absolute http(s) one: the status comes from the
// cluster, and a javascript:, data: or relative URL is kept as text for the page to show.
func TestRequestOfLinksOnlyWebURLs(t *testing.T) {
	opened := metav1.NewTime(time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC))
	open := func(url string) *crds.PullRequestStatus {
		return &crds.PullRequestStatus{HeadBranch: "gitops-reverser/team/review", Number: 7, URL: url, State: "open",
			ChangesWaiting: 3, OpenedAt: &opened}
	}
	const head = "gitops-reverser/team/review"
	for _, c := range []struct {
		name string
		d    *crds.GitDestination
		want *requestView
	}{
		{"a Direct destination has no request", &crds.GitDestination{Spec: crds.GitDestinationSpec{Branch: "main"}}, nil},
		{"no status yet is none open, from the default head branch", requestDestination(nil), &requestView{HeadBranch: head}},
		{"an https URL is linked", requestDestination(open("https://github.com/team/repo/pull/7")),
			&requestView{Number: 7, State: "open", URL: "https://github.com/team/repo/pull/7", Link: "https://github.com/team/repo/pull/7",
				HeadBranch: head, Waiting: 3, OpenedAt: opened.Time}},
		{"an http URL in capitals is linked", requestDestination(open("HTTP://gitea.local/team/repo/pulls/7")),
			&requestView{Number: 7, State: "open", URL: "HTTP://gitea.local/team/repo/pulls/7", Link: "HTTP://gitea.local/team/repo/pulls/7",
				HeadBranch: head, Waiting: 3, OpenedAt: opened.Time}},
		{"a javascript URL is text, not a link", requestDestination(open("javascript:alert(document.domain)")),
			&requestView{Number: 7, State: "open", URL: "javascript:alert(document.domain)", HeadBranch: head, Waiting: 3, OpenedAt: opened.Time}},
		{"a data URL is text, not a link", requestDestination(open("data:text/html,<script>alert(1)</script>")),
			&requestView{Number: 7, State: "open", URL: "data:text/html,<script>alert(1)</script>", HeadBranch: head, Waiting: 3, OpenedAt: opened.Time}},
		{"a URL without a scheme is text, not a link", requestDestination(open("//evil.example/pull/7")),
			&requestView{Number: 7, State: "open", URL: "//evil.example/pull/7", HeadBranch: head, Waiting: 3, OpenedAt: opened.Time}},
		{"an http URL without a host is text, not a link", requestDestination(open("https:/pull/7")),
			&requestView{Number: 7, State: "open", URL: "https:/pull/7", HeadBranch: head, Waiting: 3, OpenedAt: opened.Time}},
		{"a merged request with nothing waiting is none open", requestDestination(&crds.PullRequestStatus{HeadBranch: "mirror/review",
			Number: 6, URL: "https://github.com/team/repo/pull/6", State: "merged"}), &requestView{HeadBranch: "mirror/review"}},
		{"a closed request with files waiting is still shown", requestDestination(&crds.PullRequestStatus{HeadBranch: head,
			Number: 5, URL: "https://github.com/team/repo/pull/5", State: "closed", ChangesWaiting: 2}),
			&requestView{Number: 5, State: "closed", URL: "https://github.com/team/repo/pull/5", Link: "https://github.com/team/repo/pull/5",
				HeadBranch: head, Waiting: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := requestOf(c.d)
			switch {
			case got == nil || c.want == nil:
				if got != c.want {
					t.Errorf("requestOf = %+v, want %+v", got, c.want)
				}
			case *got != *c.want:
				t.Errorf("requestOf = %+v\nwant        %+v", *got, *c.want)
			}
		})
	}
}

// TestRequestTemplateLinksOnlyWebURLs: the page links an http(s) request URL, with the number
// and state as the link's text, and shows any other URL as escaped text, never as a link.
func TestRequestTemplateLinksOnlyWebURLs(t *testing.T) {
	views, err := parseViews()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, url string
		want      []string
		wantNot   []string
	}{
		{"an https URL is a link", "https://github.com/team/repo/pull/7",
			[]string{`<a href="https://github.com/team/repo/pull/7" rel="noopener noreferrer">#7 open</a>`, "3 file(s) waiting", "head <code>gitops-reverser/team/review</code>"},
			nil},
		{"a javascript URL is text", "javascript:alert(document.domain)",
			[]string{"#7 open <code class=\"url\">javascript:alert(document.domain)</code>", "3 file(s) waiting"},
			[]string{"<a "}},
		{"markup in a URL is escaped", `data:text/html,<script>alert(1)</script>`,
			[]string{"data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;"},
			[]string{"<a ", "<script>"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			v := requestOf(requestDestination(&crds.PullRequestStatus{HeadBranch: "gitops-reverser/team/review", Number: 7,
				URL: c.url, State: "open", ChangesWaiting: 3}))
			if err := views["overview"].ExecuteTemplate(&b, "request", v); err != nil {
				t.Fatal(err)
			}
			for _, s := range c.want {
				if !strings.Contains(b.String(), s) {
					t.Errorf("no %q in %q", s, b.String())
				}
			}
			for _, s := range c.wantNot {
				if strings.Contains(b.String(), s) {
					t.Errorf("%q in %q", s, b.String())
				}
			}
		})
	}
}

// TestClusterOfNamesTheMirroredCluster: a destination's cluster is shown as namespace/name, its
// own namespace when the reference names none, and not at all for the daemon's own cluster.
func TestClusterOfNamesTheMirroredCluster(t *testing.T) {
	for _, c := range []struct {
		ref  *crds.NamespacedReference
		want string
	}{
		{nil, ""},
		{&crds.NamespacedReference{Name: "prod"}, "team/prod"},
		{&crds.NamespacedReference{Name: "prod", Namespace: "infra"}, "infra/prod"},
	} {
		d := &crds.GitDestination{ObjectMeta: metav1.ObjectMeta{Name: "dest", Namespace: "team"}, Spec: crds.GitDestinationSpec{ClusterRef: c.ref}}
		if got := clusterOf(d); got != c.want {
			t.Errorf("clusterOf(%+v) = %q, want %q", c.ref, got, c.want)
		}
	}
}
