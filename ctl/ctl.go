// Package ctl is the command line of gitops-reverser for people: `status`, `proposals
// list|diff|approve|reject|ignore`, `sync` and `restore` (package restore), subcommands of the daemon's own binary, which also
// runs as the kubectl plugin `kubectl gitops-reverser` when it is installed as
// kubectl-gitops_reverser.
//
// Every command acts as the person who runs it: it loads their kubeconfig as kubectl does and
// reads and patches the configbutler.ai objects through the apiserver, never with the daemon's
// identity. So RBAC decides what each user may see and decide, and the apiserver's admission
// policy checks that a decision names who made it.
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// PluginName is the file name kubectl runs for `kubectl gitops-reverser`: a binary of that name
// on PATH (a symlink to, or a copy of, gitops-reverser) runs the commands, never the daemon.
const PluginName = "kubectl-gitops_reverser"

// IsPlugin reports whether argv0 (os.Args[0]) names the kubectl plugin, with or without a
// directory, and with Windows' .exe.
func IsPlugin(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == PluginName
}

// Run runs the command line args (args[0] is the program) as the kubectl plugin: the commands
// only; without one it prints the help, and --version prints version (the daemon's). A refusal of the apiserver is returned with its reason.
// The error is a cli.ExitCoder: 1 when a command failed, 2 for a wrong command line.
func Run(ctx context.Context, version string, args []string, stdout, stderr io.Writer) error {
	app := &cli.App{
		Name:      "kubectl gitops-reverser",
		Version:   version,
		Usage:     "see and decide what gitops-reverser does, as yourself (your kubeconfig, your RBAC)",
		Commands:  Commands(),
		Writer:    stdout,
		ErrWriter: stderr,
		// urfave/cli would call os.Exit on some errors; only main may exit.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   onUsageError,
		Action: func(c *cli.Context) error {
			if err := UnknownCommand(c); err != nil {
				return &exitError{err: err, code: exitUsage}
			}
			return cli.ShowAppHelp(c)
		},
	}
	err := app.RunContext(ctx, Interspersed(args))
	var coder cli.ExitCoder
	if err != nil && !errors.As(err, &coder) {
		return &exitError{err: err, code: exitUsage} // urfave/cli's own: an unknown flag, a bad value
	}
	return err
}

// UnknownCommand returns an error when the root command c was given an argument, which can only
// be a mistyped command: the daemon takes flags alone, and must not start on a typo.
func UnknownCommand(c *cli.Context) error {
	if !c.Args().Present() {
		return nil
	}
	names := make([]string, 0, len(c.App.Commands))
	for _, cmd := range c.App.Commands {
		if !cmd.Hidden {
			names = append(names, cmd.Name)
		}
	}
	return fmt.Errorf("unknown command %q; the commands are %s", c.Args().First(), strings.Join(names, ", "))
}

// Exit codes of a failed command.
const (
	exitFailed = 1 // the apiserver refused, or could not be reached
	exitUsage  = 2 // a wrong command line
)

// exitError is a failed command and its exit code; cli.ExitCoder lets main exit with it.
type exitError struct {
	err  error
	code int
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is 1 when the command failed, 2 when the command line was wrong.
func (e *exitError) ExitCode() int { return e.code }

// usageErrorf is a wrong command line (exit code 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{err: fmt.Errorf(format, args...), code: exitUsage}
}

// onUsageError turns urfave/cli's flag errors into a usage error, without dumping the help.
func onUsageError(c *cli.Context, err error, _ bool) error {
	name := c.App.Name
	if c.Command != nil && c.Command.HelpName != "" {
		name = c.Command.HelpName
	}
	return usageErrorf("%w (see %s --help)", err, name)
}
