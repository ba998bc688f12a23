package ctl

import (
	"slices"
	"strings"
	"testing"
)

// TestInterspersedMovesACommandsFlagsBeforeItsArguments: kubectl's habits (flags after the
// name, -oyaml) reach urfave/cli in the order it reads; the daemon's command lines never change.
func TestInterspersedMovesACommandsFlagsBeforeItsArguments(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want string
	}{
		{name: "flags after the name", in: "p proposals approve web -n team-a", want: "p proposals approve -n team-a web"},
		{name: "flags between the commands", in: "p proposals -n team-a list -A", want: "p proposals list -n team-a -A"},
		{name: "joined short flags", in: "p status prod -oyaml -nteam-a", want: "p status -o yaml -n team-a prod"},
		{name: "flag with =", in: "p sync prod --namespace=team-a", want: "p sync --namespace=team-a prod"},
		{name: "a name like a command", in: "p proposals approve list", want: "p proposals approve list"},
		{name: "after --", in: "p proposals diff -- -odd", want: "p proposals diff -- -odd"},
		{name: "flags before the command", in: "p -n team-a --context=prod -oyaml status", want: "p status -n team-a --context=prod -o yaml"},
		{name: "the daemon", in: "p --config c.yaml --namespace sync", want: "p --config c.yaml --namespace sync"},
		{name: "the daemon, a flag like a command", in: "p --leader-election-id sync", want: "p --leader-election-id sync"},
		{name: "the daemon, no args", in: "p", want: "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Interspersed(strings.Fields(tc.in))
			if !slices.Equal(got, strings.Fields(tc.want)) {
				t.Errorf("interspersed(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestIsPluginMatchesTheBinaryName: kubectl runs the plugin by its full path; Windows adds .exe.
func TestIsPluginMatchesTheBinaryName(t *testing.T) {
	for argv0, want := range map[string]bool{
		"kubectl-gitops_reverser":                    true,
		"/home/me/bin/kubectl-gitops_reverser":       true,
		"kubectl-gitops_reverser.exe":                true,
		"gitops-reverser":                            false,
		"/usr/local/bin/kubectl-gitops_reverser-foo": false,
	} {
		if got := IsPlugin(argv0); got != want {
			t.Errorf("IsPlugin(%q) = %v, want %v", argv0, got, want)
		}
	}
}
