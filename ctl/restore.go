package ctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/configbutler/gitops-reverser/restore"
)

// The flags of restore.
const (
	flagFrom                 = "from"
	flagRepo                 = "repo"
	flagBranch               = "branch"
	flagPath                 = "path"
	flagAt                   = "at"
	flagDryRun               = "dry-run"
	flagIncludeConfiguration = "include-configuration"
	flagOnly                 = "only"
	flagExclude              = "exclude"
)

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:  "restore",
		Usage: "recreate in the cluster what a folder of the mirror holds, as you (your kubeconfig, your rights): the repository as a backup",
		Description: "Reads a folder on disk (--from), or a folder of a Git repository (--repo, --branch, --path; cloned with your git\n" +
			"and its credentials), at a commit or as it stood at a time (--at). Applies with server-side apply, CRDs first\n" +
			"(waited for until Established), then namespaces, cluster-scoped objects, what workloads use, workloads, the rest,\n" +
			"and admission webhooks last. Leaves out what the apiserver makes for itself and gitops-reverser's own configuration.\n" +
			"Secrets encrypted with SOPS are decrypted with the age key in SOPS_AGE_KEY_FILE or SOPS_AGE_KEY, else skipped.\n" +
			"Exits with 1 when any object failed; run twice, it changes nothing the second time.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: flagKubeconfig, Usage: "kubeconfig file; empty means $KUBECONFIG, then ~/.kube/config"},
			&cli.StringFlag{Name: flagContext, Usage: "kubeconfig context to use; empty means its current context"},
			&cli.StringFlag{Name: flagFrom, Usage: "a local folder of the mirror (a checkout, or any folder of its files)"},
			&cli.StringFlag{Name: flagRepo, Usage: "a Git repository URL to clone instead of --from"},
			&cli.StringFlag{Name: flagBranch, Usage: "the branch of --repo; empty means its default"},
			&cli.StringFlag{Name: flagPath, Usage: "the folder in --repo, e.g. clusters/prod; empty means all of it"},
			&cli.StringFlag{Name: flagAt, Usage: `a commit, or a time ("2026-11-24 14:00", RFC 3339): the folder as it stood then; empty means the newest`},
			&cli.BoolFlag{Name: flagDryRun, Usage: "apply with the server's dry run: print what would be created and changed, store nothing"},
			&cli.BoolFlag{Name: flagIncludeConfiguration, Usage: "restore gitops-reverser's own configuration objects too (configbutler.ai)"},
			&cli.StringSliceFlag{Name: flagOnly, Usage: "restore only these: kind=KIND[.GROUP] or namespace=NAME (repeat or comma-separate; kinds and namespaces must both match)"},
			&cli.StringSliceFlag{Name: flagExclude, Usage: "leave these out: kind=KIND[.GROUP] or namespace=NAME"},
		},
		Action: runRestore,
	}
}

func runRestore(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("restore takes no arguments, got %q (the folder is --from)", c.Args().Slice())
	}
	only, err := selectors(c.StringSlice(flagOnly))
	if err != nil {
		return usageErrorf("--only %v", err)
	}
	exclude, err := selectors(c.StringSlice(flagExclude))
	if err != nil {
		return usageErrorf("--exclude %v", err)
	}
	source := restore.Source{Dir: c.String(flagFrom), Repo: c.String(flagRepo), Branch: c.String(flagBranch), Path: c.String(flagPath), At: c.String(flagAt)}
	if (source.Dir == "") == (source.Repo == "") {
		return usageErrorf("give the folder to restore: --from DIR, or --repo URL (with --branch and --path)")
	}
	s, err := newSession(c)
	if err != nil {
		return err
	}
	identities, err := ageIdentities()
	if err != nil {
		return &exitError{err: err, code: exitFailed}
	}
	dryRun := c.Bool(flagDryRun)
	opts := restore.Options{Config: s.config, Source: source, DryRun: dryRun, IncludeConfiguration: c.Bool(flagIncludeConfiguration),
		Only: only, Exclude: exclude, Identities: identities, Progress: restore.Lines(s.stdout, dryRun)}
	if f, ok := s.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = restore.NewBar(f, dryRun).Progress
	}
	sum, err := restore.Run(c.Context, opts)
	if err != nil {
		return &exitError{err: fmt.Errorf("restore: %w", err), code: exitFailed}
	}
	_, _ = fmt.Fprintln(s.stdout)
	sum.Print(s.stdout, dryRun)
	if n := sum.Count(restore.Failed); n > 0 {
		return &exitError{err: fmt.Errorf("restore: %d of %d objects failed (listed above)", n, len(sum.Results)), code: exitFailed}
	}
	return nil
}

func selectors(values []string) ([]restore.Selector, error) {
	var out []restore.Selector
	for _, v := range values {
		s, err := restore.ParseSelector(strings.TrimSpace(v))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// ageIdentities reads the age keys as sops does: the file SOPS_AGE_KEY_FILE names, the keys in
// SOPS_AGE_KEY, else sops' default file (age/keys.txt in the user's sops configuration folder)
// when it exists. None is no error: the encrypted Secrets are then skipped, and said so.
func ageIdentities() ([]string, error) {
	var text string
	if path := os.Getenv("SOPS_AGE_KEY_FILE"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("SOPS_AGE_KEY_FILE: %w", err)
		}
		text = string(b)
	}
	text += "\n" + os.Getenv("SOPS_AGE_KEY")
	if strings.TrimSpace(text) == "" {
		if dir, err := os.UserConfigDir(); err == nil {
			if b, err := os.ReadFile(filepath.Join(dir, "sops", "age", "keys.txt")); err == nil {
				text = string(b)
			}
		}
	}
	var keys []string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	return keys, nil
}
