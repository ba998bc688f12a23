// Command testenv starts the test control plane (etcd + kube-apiserver) and a Git server on
// loopback for manual use, prints how to reach them, and stops them on Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/configbutler/gitops-reverser/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	buildOnly := flag.Bool("build", false, "only build (or find cached) the control-plane binaries, helm and promtool, and print their paths")
	giteaOnly := flag.Bool("gitea", false, "only build (or find cached) the pinned Gitea and print its directory")
	cliOnly := flag.Bool("clitools", false, "only build (or find cached) the pinned sops, cosign 3 and 2, and crane, and print their paths")
	fluxOnly := flag.Bool("flux", false, "only build (or find cached) the pinned Flux source-controller and kustomize-controller, and print their paths")
	flag.Parse()
	if *fluxOnly {
		bins, err := testenv.EnsureFlux()
		if err != nil {
			return err
		}
		fmt.Printf("source-controller:    %s\nkustomize-controller: %s\nCRDs:                 %s\n", bins.SourceController, bins.KustomizeController, bins.CRDs)
		return nil
	}
	if *cliOnly {
		tools, err := testenv.EnsureCLITools()
		if err != nil {
			return err
		}
		fmt.Printf("sops:    %s\ncosign:  %s\ncosign2: %s\ncrane:   %s\n", tools.Sops, tools.Cosign, tools.Cosign2, tools.Crane)
		return nil
	}
	if *giteaOnly {
		dir, err := testenv.EnsureGitea()
		if err != nil {
			return err
		}
		fmt.Printf("gitea: %s\n", dir)
		return nil
	}
	if *buildOnly {
		bins, err := testenv.EnsureBinaries(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("etcd:           %s\nkube-apiserver: %s\nkubectl:        %s\nhelm:           %s\npromtool:       %s\n",
			bins.Etcd, bins.KubeAPIServer, bins.Kubectl, bins.Helm, bins.Promtool)
		return nil
	}
	fmt.Println("starting etcd and kube-apiserver (the first run builds them, a few minutes)...")
	cp, err := testenv.Start(ctx)
	if err != nil {
		return err
	}
	defer cp.Stop()
	kubeconfig := filepath.Join(cp.Dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	git, err := testenv.StartGitServer(filepath.Join(cp.Dir, "git"), "git", "git")
	if err != nil {
		return err
	}
	defer func() { _ = git.Close() }()
	if _, err := git.CreateRepo("demo"); err != nil {
		return err
	}
	bins, err := testenv.EnsureBinaries(ctx)
	if err != nil {
		return err
	}
	fmt.Printf(`
control plane ready
  export KUBECONFIG=%s
  kubectl: %s
  git:     %s (user git, password git)
logs in %s
press Ctrl-C to stop
`, kubeconfig, bins.Kubectl, git.RepoURL("demo"), cp.Dir)
	<-ctx.Done()
	return nil
}
