//go:build ignore

// The Makefile's flux target runs this program (go run ./testenv/flux_build.go): it builds (or
// finds in the tools cache) the Flux controllers and CRDs that testenv.StartFlux runs, as
// testenv.EnsureFlux does in a test, and prints where they are.
package main

import (
	"fmt"
	"os"

	"github.com/configbutler/gitops-reverser/testenv"
)

func main() {
	bins, err := testenv.EnsureFlux()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flux: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("source-controller: %s\nkustomize-controller: %s\nCRDs: %s\n",
		bins.SourceController, bins.KustomizeController, bins.CRDs)
}
