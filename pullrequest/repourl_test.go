package pullrequest

import (
	"strings"
	"testing"
)

// TestResolveDerivesAPIAndRepository reads the repository URL forms users write and derives
// each host's API base URL and repository from them.
func TestResolveDerivesAPIAndRepository(t *testing.T) {
	tests := []struct {
		name, kind, repo, api string
		want                  endpoint
	}{
		{"github https with .git", KindGitHub, "https://github.com/octo/site.git", "",
			endpoint{api: "https://api.github.com/", owner: "octo", name: "site"}},
		{"github https without .git", KindGitHub, "https://github.com/octo/site", "",
			endpoint{api: "https://api.github.com/", owner: "octo", name: "site"}},
		{"github scp-like ssh", KindGitHub, "git@github.com:octo/site.git", "",
			endpoint{api: "https://api.github.com/", owner: "octo", name: "site"}},
		{"github enterprise over ssh", KindGitHub, "ssh://git@ghe.example.com:2222/octo/site.git", "",
			endpoint{api: "https://ghe.example.com/api/v3/", owner: "octo", name: "site"}},
		{"github enterprise given API gets its slash", KindGitHub, "https://ghe.example.com/octo/site", "https://ghe.example.com/api/v3",
			endpoint{api: "https://ghe.example.com/api/v3/", owner: "octo", name: "site"}},
		{"gitlab subgroups", KindGitLab, "https://gitlab.com/group/sub/site.git", "",
			endpoint{api: "https://gitlab.com/api/v4", project: "group/sub/site"}},
		{"gitlab scp-like with subgroups", KindGitLab, "git@gitlab.example.com:group/sub/deeper/site.git", "",
			endpoint{api: "https://gitlab.example.com/api/v4", project: "group/sub/deeper/site"}},
		{"gitlab web page of the project", KindGitLab, "https://gitlab.com/group/site/-/tree/main", "",
			endpoint{api: "https://gitlab.com/api/v4", project: "group/site"}},
		{"gitlab under a relative URL root", KindGitLab, "https://example.com/gitlab/group/site.git", "https://example.com/gitlab/api/v4",
			endpoint{api: "https://example.com/gitlab/api/v4", project: "group/site"}},
		{"gitea with a port", KindGitea, "http://127.0.0.1:3000/admin/site.git", "",
			endpoint{api: "http://127.0.0.1:3000", owner: "admin", name: "site"}},
		{"gitea under /git/", KindGitea, "https://example.com/git/admin/site.git", "",
			endpoint{api: "https://example.com/git", owner: "admin", name: "site"}},
		{"gitea given API with /api/v1", KindGitea, "https://example.com/git/admin/site", "https://example.com/git/api/v1/",
			endpoint{api: "https://example.com/git", owner: "admin", name: "site"}},
		{"gitea over ssh drops the ssh port", KindGitea, "ssh://git@gitea.example.com:2222/admin/site.git", "",
			endpoint{api: "https://gitea.example.com", owner: "admin", name: "site"}},
		{"credentials in the URL are not kept", KindGitea, "https://bot:secret@gitea.example.com/admin/site.git", "",
			endpoint{api: "https://gitea.example.com", owner: "admin", name: "site"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolve(tt.kind, tt.repo, tt.api)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("resolve(%s, %q, %q) = %+v, want %+v", tt.kind, tt.repo, tt.api, got, tt.want)
			}
		})
	}
}

// TestNewRefusesWhatItCannotServe shows New fails clearly for hosts it does not support and
// repository URLs it cannot read.
func TestNewRefusesWhatItCannotServe(t *testing.T) {
	tests := []struct {
		name string
		s    Settings
		want string // a part of the error
	}{
		{"bitbucket", Settings{Kind: "bitbucket", Repository: "https://bitbucket.org/o/r.git"}, "not supported yet"},
		{"azure", Settings{Kind: "azure", Repository: "https://dev.azure.com/o/p/_git/r"}, "not supported yet"},
		{"unknown kind", Settings{Kind: "svn", Repository: "https://example.com/o/r"}, `unknown pull request host "svn"`},
		{"empty URL", Settings{Kind: KindGitHub}, "repository URL is empty"},
		{"owner only", Settings{Kind: KindGitea, Repository: "https://example.com/site.git"}, "want HOST/OWNER/REPO"},
		{"github with a deeper path", Settings{Kind: KindGitHub, Repository: "https://github.com/a/b/c"}, "want HOST/OWNER/REPO for github"},
		{"a local path", Settings{Kind: KindGitLab, Repository: "/srv/git/site.git"}, "want https://HOST/OWNER/REPO"},
		{"file scheme", Settings{Kind: KindGitLab, Repository: "file:///srv/git/site.git"}, `unsupported scheme "file"`},
		{"dot-dot in the path", Settings{Kind: KindGitea, Repository: "https://example.com/a/../b"}, "bad path"},
		{"API without scheme", Settings{Kind: KindGitea, Repository: "https://example.com/a/b", API: "example.com"}, "want http(s)://HOST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := New(tt.s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%+v) = %v, %v; want an error saying %q", tt.s, h, err, tt.want)
			}
		})
	}
}

// TestNewTakesForgejoAsGitea shows Forgejo, which serves Gitea's API, gets the Gitea host.
func TestNewTakesForgejoAsGitea(t *testing.T) {
	h, err := New(Settings{Kind: "Forgejo", Repository: "https://codeberg.org/o/r.git"})
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := h.(*giteaHost); !ok || g.kind != KindGitea || g.url != "https://codeberg.org" {
		t.Errorf("New(forgejo) = %#v, want the Gitea host on https://codeberg.org", h)
	}
}
