// Command demo shows gitops-reverser end to end on this machine alone: it starts a local control
// plane (testenv), a Git server with an empty repository, the daemon, applies a sample
// GitRepoConfig / GitDestination / WatchRule, creates and edits demo objects as two users, and
// prints the repository's history. DEMO_ONCE=1 exits after printing; otherwise Ctrl-C stops it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/configbutler/gitops-reverser/daemon"
	"github.com/configbutler/gitops-reverser/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	step("starting a local control plane (etcd + kube-apiserver; the first run builds them, a few minutes)")
	cp, err := testenv.Start(ctx)
	if err != nil {
		return err
	}
	defer cp.Stop()
	kubeconfig := filepath.Join(cp.Dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	step("starting a Git server with an empty repository")
	git, err := testenv.StartGitServer(filepath.Join(cp.Dir, "git"), "demo", "demo-password")
	if err != nil {
		return err
	}
	defer func() { _ = git.Close() }()
	if _, err := git.CreateRepo("cluster-state"); err != nil {
		return err
	}

	step("starting gitops-reverser")
	if err := createNamespace(ctx, cp, daemonNS); err != nil {
		return err
	}
	logFile := filepath.Join(cp.Dir, "gitops-reverser.log")
	logs, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer logs.Close()
	daemonCtx, stopDaemon := context.WithCancel(ctx)
	daemonDone := make(chan error, 1)
	metricsAddr, webhookAddr := loopback(), loopback()
	go func() {
		daemonDone <- daemon.Run(daemonCtx, []string{"gitops-reverser",
			"--kubeconfig", kubeconfig, "--work-dir", filepath.Join(cp.Dir, "work"), "--namespace", daemonNS,
			"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", loopback(),
			"--webhook-bind-address", webhookAddr, "--webhook-url", "https://" + webhookAddr,
			"--git-batch-quiet-ms", "500", "--log-format", "json",
		}, io.Discard, logs)
	}()
	defer func() {
		stopDaemon()
		<-daemonDone
	}()

	d := &demo{cp: cp, git: git, metricsAddr: metricsAddr}
	if err := d.seed(ctx); err != nil {
		return err
	}
	if err := d.waitForHistory(ctx); err != nil {
		return err
	}
	if err := d.printLog(); err != nil {
		return err
	}
	if os.Getenv("DEMO_ONCE") != "" {
		return nil
	}
	fmt.Printf("\ndaemon log: %s\nkubeconfig: %s\n", logFile, kubeconfig)
	fmt.Println("the daemon keeps mirroring; try: KUBECONFIG=" + kubeconfig + " kubectl -n demo create configmap hello --from-literal=a=b")
	fmt.Println("press Ctrl-C to stop")
	<-ctx.Done()
	return nil
}

func step(msg string) { fmt.Println("==> " + msg) }

// loopback picks a free loopback address for the daemon's endpoints.
func loopback() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}

// printLog shows `git log --stat` of a fresh clone, as a user of the repository would see it.
func (d *demo) printLog() error {
	dir, err := os.MkdirTemp("", "demo-clone-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	clone := exec.Command("git", "clone", "-q", d.git.AuthURL("cluster-state"), dir)
	clone.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := clone.CombinedOutput(); err != nil {
		return fmt.Errorf("clone: %w: %s", err, out)
	}
	step("the repository's history (git log --stat)")
	log := exec.Command("git", "-C", dir, "log", "--stat", "--format=commit %h%nAuthor: %an <%ae>%nDate:   %ad%n%n    %s")
	log.Stdout = os.Stdout
	log.Stderr = os.Stderr
	return log.Run()
}

var errTimeout = errors.New("timed out waiting for the mirror")

// waitForHistory waits until every demo object is in the repository and both users' commits are.
func (d *demo) waitForHistory(ctx context.Context) error {
	step("waiting for the changes to reach Git")
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		files, err := d.git.Files("cluster-state", "main")
		if err == nil && containsAll(files, d.expected) && d.authored("alice", "bob") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errTimeout
}

// authored reports whether every user has a commit in the repository.
func (d *demo) authored(users ...string) bool {
	log, err := d.git.Log("cluster-state", "main")
	if err != nil {
		return false
	}
	seen := map[string]bool{}
	for _, c := range log {
		seen[c.AuthorName] = true
	}
	for _, u := range users {
		if !seen[u] {
			return false
		}
	}
	return true
}

func containsAll(files, want []string) bool {
	have := strings.Join(files, "\n") + "\n"
	for _, w := range want {
		if !strings.Contains(have, w+"\n") {
			return false
		}
	}
	return true
}
