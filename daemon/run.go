// Package daemon is the gitops-reverser program: it parses and validates the configuration
// (flags, environment, YAML file), wires the components together in dependency order, serves
// health and metrics, and shuts everything down in reverse order when its context ends.
// Nothing below this package reads flags or globals; everything is passed in.
package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/lmittmann/tint"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	"k8s.io/klog/v2"

	"github.com/configbutler/gitops-reverser/ctl"
)

// Run runs the daemon with the given command line (args[0] is the program name) until ctx ends.
// An invalid configuration returns a *ConfigError; main maps it to exit code 2. A command
// (status, proposals, sync) runs instead of the daemon, and so does any command line when the
// program is the kubectl plugin (ctl.PluginName).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && ctl.IsPlugin(args[0]) {
		return ctl.Run(ctx, Version, args, stdout, stderr)
	}
	return runWith(ctx, args, stdout, stderr, func(ctx context.Context, cfg Config) error {
		log := newLogger(stderr, cfg)
		klog.SetSlogLogger(log) // client-go's own messages in the same format and stream
		if os.Getenv("GOGC") == "" {
			// A mirror's heap is mostly short-lived garbage (decoded pages, rendered YAML): collecting
			// at 50% growth instead of 100% keeps the footprint small for little CPU.
			debug.SetGCPercent(50)
		}
		return serve(ctx, cfg, log)
	})
}

// runWith parses and validates the configuration, then hands it to action.
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, action func(context.Context, Config) error) error {
	var started bool
	var cfg Config
	var raw rawSettings
	set := settings(&cfg, &raw)
	app := &cli.App{
		Name:      "gitops-reverser",
		Usage:     "mirror a live Kubernetes cluster into Git, one canonical YAML file per object, committed by who changed it",
		Version:   Version,
		Flags:     flagsOf(set),
		Commands:  ctl.Commands(),
		Writer:    stdout,
		ErrWriter: stderr,
		// urfave/cli would call os.Exit on some errors; only main may exit.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return &ConfigError{Err: err}
		},
		Before: func(c *cli.Context) error {
			if path := c.String(keyConfig); path != "" {
				return applyConfigFile(c, path)
			}
			return nil
		},
		Action: func(c *cli.Context) error {
			if err := ctl.UnknownCommand(c); err != nil {
				return &ConfigError{Err: err}
			}
			cfg, err := configOf(&cfg, &raw, set)
			if err != nil {
				return &ConfigError{Err: err}
			}
			started = true
			return action(c.Context, cfg)
		},
	}
	err := app.RunContext(ctx, ctl.Interspersed(args))
	var cfgErr *ConfigError
	var cmdErr cli.ExitCoder
	if err != nil && !started && !errors.As(err, &cfgErr) && !errors.As(err, &cmdErr) {
		// Flag, environment and file errors all surface before the daemon starts; a command's
		// own errors carry their exit code.
		return &ConfigError{Err: err}
	}
	return err
}

func newLogger(w io.Writer, cfg Config) *slog.Logger {
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.Log.Level}))
	}
	f, isFile := w.(*os.File)
	return slog.New(tint.NewTextHandler(w, &tint.Options{
		Level:   cfg.Log.Level,
		NoColor: !isFile || !term.IsTerminal(int(f.Fd())),
	}))
}

// ExitCode maps Run's error to the process exit code: 0 ok, 2 bad configuration, a command's own
// code (1 failed, 2 wrong command line), 1 anything else.
func ExitCode(err error) int {
	var cfgErr *ConfigError
	var cmdErr cli.ExitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &cfgErr):
		return 2
	case errors.As(err, &cmdErr):
		return cmdErr.ExitCode()
	default:
		return 1
	}
}
