package main

import (
	"context"
	"fmt"
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
