package ctl

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Interspersed returns the command line args with a command's flags moved in front of its
// arguments, so `proposals approve NAME -n team-a` works as with kubectl: urfave/cli reads a
// command's flags only before its first argument. Flags of the commands may also come before the
// command (`kubectl gitops-reverser -n team-a proposals list`). A command line without a command
// is returned as it is: the daemon's own flags are never moved.
func Interspersed(args []string) []string {
	cmds := Commands()
	flags := flagNames(cmds)
	start := 1
	for start < len(args) && isFlag(args[start]) && knownFlag(args[start], flags) {
		start += flagWidth(args, start, flags)
	}
	if start >= len(args) || command(cmds, args[start]) == nil {
		return args
	}
	path := append([]string{args[0]}, args[start])
	var moved, operands []string
	level := command(cmds, args[start]).Subcommands
	for i := 1; i < start; {
		n := flagWidth(args, i, flags)
		moved = append(moved, split(args[i:i+n], flags)...)
		i += n
	}
	for i := start + 1; i < len(args); {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case isFlag(a):
			n := flagWidth(args, i, flags)
			moved = append(moved, split(args[i:i+n], flags)...)
			i += n
		case len(operands) == 0 && command(level, a) != nil:
			path = append(path, a)
			level = command(level, a).Subcommands
			i++
		default:
			operands = append(operands, a)
			i++
		}
	}
	out := append(path, moved...)
	if slices.ContainsFunc(operands, isFlag) {
		out = append(out, "--")
	}
	return append(out, operands...)
}

// flagNames maps the name of every flag of cmds (and their subcommands) to whether it takes a
// value.
func flagNames(cmds []*cli.Command) map[string]bool {
	out := map[string]bool{}
	for _, cmd := range cmds {
		for _, f := range cmd.Flags {
			_, isBool := f.(*cli.BoolFlag)
			for _, name := range f.Names() {
				out[name] = !isBool
			}
		}
		for name, value := range flagNames(cmd.Subcommands) {
			out[name] = value
		}
	}
	return out
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' && a != "--" }

// knownFlag reports whether a is a flag of the commands, joined short flags (-oyaml) included.
func knownFlag(a string, flags map[string]bool) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	_, known := flags[name]
	return known || (!strings.HasPrefix(a, "--") && name != "" && flags[name[:1]])
}

// flagWidth is how many arguments the flag at args[i] spans: 2 for `--name value`, else 1.
func flagWidth(args []string, i int, flags map[string]bool) int {
	name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
	if !hasValue && flags[name] && i+1 < len(args) {
		return 2
	}
	return 1
}

// split spells kubectl's joined short flags, `-oyaml` and `-nteam-a`, as `-o yaml`.
func split(flag []string, flags map[string]bool) []string {
	a := flag[0]
	if len(flag) > 1 || strings.HasPrefix(a, "--") || len(a) < 3 || strings.Contains(a, "=") {
		return flag
	}
	if _, known := flags[a[1:]]; known || !flags[a[1:2]] {
		return flag
	}
	return []string{a[:2], a[2:]}
}

// command is the command of cmds named (or aliased) name, nil if none.
func command(cmds []*cli.Command, name string) *cli.Command {
	for _, cmd := range cmds {
		if cmd.HasName(name) {
			return cmd
		}
	}
	return nil
}
