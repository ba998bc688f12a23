package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// runImage parses release image's command line, builds the image and prints where it is and what
// it weighs.
func runImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{Log: stderr}
	var platforms string
	var epoch int64
	fs.StringVar(&o.Dir, "C", ".", "the module root, where the daemon's main package is")
	fs.StringVar(&o.Out, "out", "bin/image", "output directory: binaries, OCI layouts, SBOM (replaced)")
	fs.StringVar(&o.Repository, "repository", defaultRepository, "image name without tag, as the chart and deploy/ name it")
	fs.StringVar(&o.Version, "version", "dev", "version: the daemon's --version, the image tag and label")
	fs.StringVar(&o.Revision, "revision", "", "the commit the image is built from (label org.opencontainers.image.revision)")
	fs.StringVar(&o.Source, "source", defaultSource, "the source repository (label org.opencontainers.image.source)")
	fs.StringVar(&platforms, "platforms", strings.Join(defaultPlatforms, ","), "comma-separated os/arch list")
	fs.Int64Var(&epoch, "created", sourceDateEpoch(), "creation time in Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.Platforms = strings.Split(platforms, ",")
	o.Created = time.Unix(epoch, 0).UTC()

	res, err := build(ctx, o)
	if err != nil {
		return err
	}
	for _, p := range res.Platforms {
		_, _ = fmt.Fprintf(stdout, "%-12s %s  layer %.2f MiB compressed (binary %.2f MiB)\n",
			p.Platform, p.Digest, mib(p.LayerSize), mib(p.BinarySize))
	}
	_, _ = fmt.Fprintf(stdout, "image  %s  in %s (OCI layout)\n", res.Reference(), res.Layout)
	_, _ = fmt.Fprintf(stdout, "sbom   %s  in %s, and %s (OCI artifact referring to the image)\n", res.SBOMDigest, res.SBOMFile, res.SBOMLayout)
	_, _ = fmt.Fprintf(stdout, "built in %s (compile %s, image %s)\n", (res.Compile + res.Assemble).Round(time.Millisecond),
		res.Compile.Round(time.Millisecond), res.Assemble.Round(time.Millisecond))
	return nil
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH (the reproducible-builds convention), or 0.
func sourceDateEpoch() int64 {
	n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
