package ctl

import (
	"context"
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/configbutler/gitops-reverser/crds"
)

// The names of the commands' flags, as kubectl spells them.
const (
	flagKubeconfig    = "kubeconfig"
	flagContext       = "context"
	flagNamespace     = "namespace"
	flagAllNamespaces = "all-namespaces"
	flagOutput        = "output"
	flagDestination   = "destination"
	flagPhase         = "phase"
)

// Values of --output besides the default table.
const (
	outputWide = "wide"
	outputYAML = "yaml"
	outputJSON = "json"
)

// Commands returns the commands, for the daemon's program and the kubectl plugin alike.
func Commands() []*cli.Command {
	cmds := []*cli.Command{
		{
			Name:      "status",
			Usage:     "show the GitDestinations: Ready, write-back (on, pending proposals, last run, approvals), pull requests",
			ArgsUsage: "[DESTINATION...]",
			Flags:     listFlags(),
			Action:    run(status),
		},
		{
			Name:    "proposals",
			Aliases: []string{"proposal"},
			Usage:   "list, read and decide the Proposals that edits in Git opened",
			Subcommands: []*cli.Command{
				{
					Name:      "list",
					Aliases:   []string{"ls"},
					Usage:     "list Proposals, oldest first",
					ArgsUsage: "[NAME...]",
					Flags: append(listFlags(),
						&cli.StringFlag{Name: flagDestination, Usage: "only the Proposals of this GitDestination"},
						&cli.StringFlag{Name: flagPhase, Usage: "only the Proposals in this phase, e.g. Pending"}),
					Action: run(listProposals),
				},
				{
					Name:      "diff",
					Usage:     "print a Proposal's diff: from the live object to the file in Git",
					ArgsUsage: "NAME",
					Flags:     kubeFlags(),
					Action:    run(diffProposal),
				},
				decideCommand("approve", crds.DecisionApprove, "approve Proposals: write-back applies them, if you may make the change yourself"),
				decideCommand("reject", crds.DecisionReject, "reject Proposals: the live state stays and the mirror writes it back over the edit"),
				decideCommand("ignore", crds.DecisionIgnore, "ignore Proposals: neither apply nor revert the edit"),
			},
		},
		{
			Name:      "sync",
			Usage:     "ask for a write-back run of GitDestinations now (the configbutler.ai/sync-now annotation)",
			ArgsUsage: "DESTINATION...",
			Flags:     kubeFlags(),
			Action:    run(syncNow),
		},
		restoreCommand(),
	}
	setUsageErrors(cmds)
	return cmds
}

// setUsageErrors makes a wrong flag of every command a usage error (exit code 2) that names the
// command, instead of urfave/cli's help page.
func setUsageErrors(cmds []*cli.Command) {
	for _, cmd := range cmds {
		cmd.OnUsageError = onUsageError
		setUsageErrors(cmd.Subcommands)
	}
}

func decideCommand(name string, decision crds.Decision, usage string) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "NAME...",
		Flags:     kubeFlags(),
		Action: run(func(ctx context.Context, s *session, names []string) error {
			return decide(ctx, s, names, decision)
		}),
	}
}

// kubeFlags choose the cluster, the user and the namespace, as kubectl's flags of the same names.
func kubeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagKubeconfig, Usage: "kubeconfig file; empty means $KUBECONFIG, then ~/.kube/config"},
		&cli.StringFlag{Name: flagContext, Usage: "kubeconfig context to use; empty means its current context"},
		&cli.StringFlag{Name: flagNamespace, Aliases: []string{"n"}, Usage: "namespace; empty means the context's, else default"},
	}
}

// listFlags are kubeFlags and the flags of commands that list objects.
func listFlags() []cli.Flag {
	return append(kubeFlags(),
		&cli.BoolFlag{Name: flagAllNamespaces, Aliases: []string{"A"}, Usage: "list in every namespace you may list in"},
		&cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Usage: "output format: wide, yaml or json; empty means a table"},
	)
}

// run adapts a command to urfave/cli: it validates the flags, opens a session as the user and
// turns a failure into exit code 1.
func run(command func(ctx context.Context, s *session, args []string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		s, err := newSession(c)
		if err != nil {
			return err
		}
		if err := command(c.Context, s, c.Args().Slice()); err != nil {
			var exit *exitError
			if errors.As(err, &exit) {
				return err
			}
			return &exitError{err: err, code: exitFailed}
		}
		return nil
	}
}
