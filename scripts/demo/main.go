// Command demo shows gitops-reverser end to end on this machine alone: it starts a local control
// plane (testenv), a Git server with an empty repository, the daemon, applies a sample
// GitRepoConfig / GitDestination / WatchRule, creates and edits demo objects as two users, and
// prints the repository's history. DEMO_ONCE=1 exits after printing; otherwise Ctrl-C stops it.
package main

import (
	"context"
	"errors"
	"flag"
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

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configbutler/gitops-reverser/daemon"
	"github.com/configbutler/gitops-reverser/testenv"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "use this existing cluster (e.g. kind) instead of starting a local control plane")
	webhookHost := flag.String("webhook-host", "127.0.0.1", "address of this machine as the cluster's apiserver reaches it (for kind: the docker network gateway)")
	flag.Parse()
	if err := run(*kubeconfig, *webhookHost); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// cluster is where the demo runs: the embedded control plane or an existing cluster. The demo
// users act through impersonation, which works the same on both.
type cluster struct {
	kubeconfig string
	admin      *rest.Config
	dir        string // scratch space: repository, work dir, logs
}

func (c *cluster) as(user string) *rest.Config {
	cfg := rest.CopyConfig(c.admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return cfg
}

func openCluster(ctx context.Context, kubeconfig string) (*cluster, func(), error) {
	if kubeconfig != "" {
		admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, nil, fmt.Errorf("load kubeconfig: %w", err)
		}
		dir, err := os.MkdirTemp("", "gitops-reverser-demo-")
		if err != nil {
			return nil, nil, err
		}
		return &cluster{kubeconfig: kubeconfig, admin: admin, dir: dir}, func() { _ = os.RemoveAll(dir) }, nil
	}
	step("starting a local control plane (etcd + kube-apiserver; the first run builds them, a few minutes)")
	cp, err := testenv.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(cp.Dir, "kubeconfig")
	if err := cp.WriteKubeconfig(path); err != nil {
		cp.Stop()
		return nil, nil, err
	}
	return &cluster{kubeconfig: path, admin: cp.AdminConfig(), dir: cp.Dir}, cp.Stop, nil
}

func run(kubeconfig, webhookHost string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, closeCluster, err := openCluster(ctx, kubeconfig)
	if err != nil {
		return err
	}
	defer closeCluster()
	step("starting a Git server with an empty repository")
	git, err := testenv.StartGitServer(filepath.Join(c.dir, "git"), "demo", "demo-password")
	if err != nil {
		return err
	}
	defer func() { _ = git.Close() }()
	if _, err := git.CreateRepo("cluster-state"); err != nil {
		return err
	}

	step("starting gitops-reverser")
	if err := createNamespace(ctx, c.admin, daemonNS); err != nil {
		return err
	}
	logFile := filepath.Join(c.dir, "gitops-reverser.log")
	logs, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer func() { _ = logs.Close() }()
	daemonCtx, stopDaemon := context.WithCancel(ctx)
	daemonDone := make(chan error, 1)
	metricsAddr, webhookAddr := loopback(), freeAddr(webhookHost)
	go func() {
		daemonDone <- daemon.Run(daemonCtx, []string{"gitops-reverser",
			"--kubeconfig", c.kubeconfig, "--work-dir", filepath.Join(c.dir, "work"), "--namespace", daemonNS,
			"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", loopback(),
			"--webhook-bind-address", webhookAddr, "--webhook-url", "https://" + webhookAddr,
			"--git-batch-quiet-ms", "500", "--log-format", "json",
		}, io.Discard, logs)
	}()
	defer func() {
		stopDaemon()
		if err := <-daemonDone; err != nil {
			fmt.Fprintln(os.Stderr, "gitops-reverser:", err)
		}
	}()

	d := &demo{cluster: c, git: git, metricsAddr: metricsAddr}
	if err := d.seed(ctx); err != nil {
		return err
	}
	if err := d.waitForHistory(ctx); err != nil {
		if errors.Is(err, errTimeout) {
			showLogTail(logFile, 60)
		}
		return err
	}
	if err := d.printLog(); err != nil {
		return err
	}
	if os.Getenv("DEMO_ONCE") != "" {
		return nil
	}
	fmt.Printf("\ndaemon log: %s\nkubeconfig: %s\n", logFile, c.kubeconfig)
	fmt.Println("the daemon keeps mirroring; try: KUBECONFIG=" + c.kubeconfig + " kubectl -n demo create configmap hello --from-literal=a=b")
	fmt.Println("press Ctrl-C to stop")
	<-ctx.Done()
	return nil
}

func step(msg string) { fmt.Println("==> " + msg) }

// loopback picks a free loopback address for the daemon's endpoints.
func loopback() string { return freeAddr("127.0.0.1") }

// freeAddr picks a free port on host.
func freeAddr(host string) string {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return net.JoinHostPort(host, "0")
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// printLog shows `git log --stat` of a fresh clone, as a user of the repository would see it.
func (d *demo) printLog() error {
	dir, err := os.MkdirTemp("", "demo-clone-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
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

// showLogTail prints the last lines of the daemon's log, to say why the mirror did not arrive.
func showLogTail(path string, lines int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	fmt.Fprintf(os.Stderr, "the last %d lines of gitops-reverser's log (%s):\n", min(lines, len(all)), path)
	for _, line := range all[max(0, len(all)-lines):] {
		fmt.Fprintln(os.Stderr, "  "+line)
	}
}

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
