package receiver

import "testing"

func TestSameRepository(t *testing.T) {
	const repo = "https://github.com/org/repo.git"
	for _, tc := range []struct {
		name     string
		ref, url string
		want     bool
	}{
		{"Identical", repo, repo, true},
		{"NoGitSuffix", "https://github.com/org/repo", repo, true},
		{"TrailingSlash", "https://github.com/org/repo/", repo, true},
		{"GitSuffixAndSlash", "https://github.com/org/repo.git/", "https://github.com/org/repo", true},
		{"HTTP", "http://github.com/org/repo", repo, true},
		{"SSHURL", "ssh://git@github.com/org/repo.git", repo, true},
		{"SSHDefaultPort", "ssh://git@github.com:22/org/repo.git", repo, true},
		{"GitProtocol", "git://github.com/org/repo.git", repo, true},
		{"GitPlusSSH", "git+ssh://git@github.com/org/repo.git", repo, true},
		{"SCPLike", "git@github.com:org/repo.git", repo, true},
		{"SCPLikeNoUser", "github.com:org/repo", repo, true},
		{"SCPLikeAbsolutePath", "git@github.com:/org/repo.git", repo, true},
		{"HostCase", "https://GitHub.COM/org/repo", repo, true},
		{"SCPHostCase", "git@GITHUB.com:org/repo.git", repo, true},
		{"UserInfo", "https://x-access-token:secret@github.com/org/repo.git", repo, true},
		{"HTTPSDefaultPort", "https://github.com:443/org/repo", repo, true},
		{"HTTPDefaultPort", "http://github.com:80/org/repo", repo, true},
		{"Whitespace", "  https://github.com/org/repo \n", repo, true},
		{"BarePath", "org/repo", repo, true},
		{"BarePathGitSuffix", "org/repo.git", repo, true},
		{"BarePathAnyHost", "org/repo", "https://git.example.com/org/repo", true},
		{"BarePathBothSides", "org/repo", "/org/repo/", true},
		{"SubGroups", "git@gitlab.com:group/sub/name.git", "https://gitlab.com/group/sub/name", true},
		{"SamePortBothSides", "ssh://git@gitlab.com:2222/group/name.git", "https://gitlab.com:2222/group/name", true},
		{"IPv6", "ssh://git@[::1]:22/org/repo", "https://[::1]/org/repo.git", true},
		{"File", "file:///srv/git/repo.git", "file:///srv/git/repo", true},

		{"PathCaseKept", "https://github.com/Org/Repo", repo, false},
		{"BarePathCaseKept", "Org/repo", repo, false},
		{"OtherRepo", "https://github.com/org/other", repo, false},
		{"OtherOrg", "https://github.com/evil/repo", repo, false},
		{"OtherHost", "https://gitlab.com/org/repo", repo, false},
		{"OtherHostSCP", "git@gitlab.com:org/repo.git", repo, false},
		{"NonDefaultPort", "https://github.com:8443/org/repo", repo, false},
		{"NonDefaultSSHPort", "ssh://git@gitlab.com:2222/group/name.git", "https://gitlab.com/group/name", false},
		{"PrefixTrick", "https://github.com/org/repo-evil", repo, false},
		{"PrefixTrickReverse", "https://github.com/org/repo", "https://github.com/org/repo-evil", false},
		{"PrefixTrickBare", "org/repo-evil", repo, false},
		{"PrefixTrickSCP", "git@github.com:org/repo-evil.git", repo, false},
		{"ParentPath", "https://github.com/org", repo, false},
		{"ChildPath", "https://github.com/org/repo/sub", repo, false},
		{"BareParentPath", "org", repo, false},
		{"HostSuffixTrick", "https://github.com.evil.example/org/repo", repo, false},
		{"HostInPathTrick", "https://evil.example/github.com/org/repo", repo, false},
		{"UserInfoHostTrick", "https://github.com@evil.example/org/repo", repo, false},
		{"BareHostAndPath", "github.com/org/repo", repo, false},
		{"DotGitOnly", ".git", "https://github.com/.git", false},
		{"EmptyRef", "", repo, false},
		{"EmptyURL", "https://github.com/org/repo", "", false},
		{"BothEmpty", "", "", false},
		{"HostOnly", "https://github.com/", "https://github.com", false},
		{"Query", "https://github.com/org/repo?x=1", repo, false},
		{"Fragment", "https://github.com/org/repo#main", repo, false},
		{"OtherScheme", "ftp://github.com/org/repo", repo, false},
		{"NoHost", "https:///org/repo", repo, false},
		{"FileWithHost", "file://github.com/org/repo", repo, false},
		{"FileAgainstHTTPS", "file:///org/repo", repo, false},
		{"SCPNoHost", "git@:org/repo", repo, false},
		{"Unparseable", "https://github.com:port/org/repo", repo, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameRepository(tc.ref, tc.url); got != tc.want {
				t.Errorf("SameRepository(%q, %q) = %v, want %v", tc.ref, tc.url, got, tc.want)
			}
			if got := SameRepository(tc.url, tc.ref); got != tc.want {
				t.Errorf("SameRepository(%q, %q) = %v, want %v (reversed)", tc.url, tc.ref, got, tc.want)
			}
		})
	}
}

func TestMatchesRepository(t *testing.T) {
	ev := Event{Repository: []string{"https://github.com/org/repo.git", "org/repo"}}
	if !MatchesRepository(ev, "git@github.com:org/repo.git") {
		t.Error("no match for the SSH form of the event's repository")
	}
	if MatchesRepository(ev, "https://github.com/org/repo-evil.git") {
		t.Error("the event matches another repository")
	}
	if MatchesRepository(Event{}, "https://github.com/org/repo.git") {
		t.Error("an event with no repository matches")
	}
}

// FuzzSameRepository: never panics, is symmetric, a parseable reference names itself, and adding a
// suffix to a reference always names another repository.
func FuzzSameRepository(f *testing.F) {
	for _, s := range [][2]string{
		{"https://github.com/org/repo.git", "git@github.com:org/repo"},
		{"ssh://git@[::1]:2222/a/b/", "a/b"},
		{"file:///srv/repo.git", "https://u:p@H.example:443/x"},
		{"org/repo", "org/repo-evil"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if SameRepository(a, b) != SameRepository(b, a) {
			t.Fatalf("SameRepository(%q, %q) is not symmetric", a, b)
		}
		if _, ok := parseRepository(a); !ok {
			if SameRepository(a, a) {
				t.Fatalf("%q does not parse but names itself", a)
			}
			return
		}
		if !SameRepository(a, a) {
			t.Fatalf("%q does not name itself", a)
		}
		if SameRepository(a, a+"-evil") {
			t.Fatalf("%q names %q", a, a+"-evil")
		}
	})
}
