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
	"strings"
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
	tool := flag.String("tool", "", "only build (or find cached) the Go command `name` from the package@version that follows, with the go build flags after it, and print its path")
	flag.Parse()
	if *tool != "" {
		return buildTool(*tool, flag.Args())
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

// buildTool builds name as the tests do (testenv.EnsureGoTool) from args: package@version, then
// go build flags. The Makefile's tool targets build through it, so a make test that builds tools
// while tests run and a test that needs one of them share one lock and never build it twice.
func buildTool(name string, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("-tool %s: name the package@version to build", name)
	}
	pkg, version, ok := strings.Cut(args[0], "@")
	if !ok || pkg == "" || version == "" {
		return fmt.Errorf("-tool %s: %q is not package@version", name, args[0])
	}
	path, err := testenv.EnsureGoTool(name, pkg, version, args[1:]...)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", name, path)
	return nil
}
