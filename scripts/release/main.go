// Command release makes what a release of gitops-reverser is made of with Go alone: no container
// engine, no CI vendor's runners, from any machine.
//
//	release image   the daemon's OCI image (linux/amd64, linux/arm64) and its SPDX SBOM (make image)
//	release build   the image, signed, with SLSA provenance and the SBOM attested; the Helm chart as
//	                an OCI artifact; binaries for linux and darwin with signed checksums; a krew
//	                manifest (make release)
//	release publish pushes a release to an OCI registry and prints how to verify it (make publish)
//	release keygen  a cosign-compatible key pair (what cosign generate-key-pair writes)
//
// The image starts from nothing and holds only the static daemon; the same commit built with the
// same Go version gives the same digests. docs/image.md says what is in the image, docs/release.md
// how a release is made and verified.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// commands are release's subcommands.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"image":   runImage,
	"build":   runBuild,
	"publish": runPublish,
	"keygen":  runKeygen,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// run runs the subcommand args[0] with the rest of args.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || commands[args[0]] == nil {
		return fmt.Errorf("usage: release image|build|publish|keygen [flags] (-h for a command's flags)")
	}
	return commands[args[0]](ctx, args[1:], stdout, stderr)
}
