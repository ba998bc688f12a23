package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkImage builds the image as make image does and prints what a pull downloads per
// platform and how long the build took: compiling (the daemon's packages come from Go's cache
// after the first build, so mostly linking) and assembling the layers, index, SBOM and layouts.
func BenchmarkImage(b *testing.B) {
	for range b.N {
		res, err := build(context.Background(), testOptions(filepath.Join(b.TempDir(), "image")))
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range res.Platforms {
			fmt.Printf("image: %s %.2f MiB compressed (binary %.2f MiB)\n", p.Platform, mib(p.LayerSize), mib(p.BinarySize))
		}
		fmt.Printf("image: built in %s (compile %s, assemble %s)\n", (res.Compile + res.Assemble).Round(time.Millisecond),
			res.Compile.Round(time.Millisecond), res.Assemble.Round(time.Millisecond))
	}
}

// BenchmarkRelease makes a release as make release does, from a clean clone with a throwaway key,
// and prints how long it took: compiling the four platforms' binaries (after the first build, Go's
// cache leaves mostly linking) and packaging, attesting and signing everything. A cold build (an
// empty Go cache) compiles every package four times over; docs/release.md gives that figure.
func BenchmarkRelease(b *testing.B) {
	b.Setenv(passwordEnv, testPassword)
	src := taggedSource(b)
	key, _ := keyPair(b)
	for range b.N {
		out := filepath.Join(b.TempDir(), "release")
		args := []string{"build", "-C", src, "-out", out, "-version", testVersion, "-key", key}
		start := time.Now()
		if err := run(context.Background(), args, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
		total := time.Since(start)
		r := readRelease(b, out)
		fmt.Printf("release: built in %s (%d files, image, chart, signatures)\n", total.Round(time.Millisecond), len(r.Files))
	}
}
