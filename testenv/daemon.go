package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bounds of the daemon harness: generous, since a shared test machine can be slow; a test that
// hits one has failed anyway.
const (
	daemonStopTimeout = time.Minute
	daemonHTTPTimeout = 2 * time.Minute
)

// DaemonConfig says how to run a daemon binary for a test.
type DaemonConfig struct {
	Binary string
	Args   []string
	Env    []string // added to the test's own environment
	// MetricsAddr is the host:port where the daemon serves /metrics, for Metric.
	MetricsAddr string
	// Abort, when set, is checked at every poll of FailFast: an error fails the test at once.
	// It reports trouble the daemon may not show itself, such as a request the apiserver refused.
	Abort func() error
}

// Daemon is a binary running as a child process of the test, the way it runs in production:
// its own process, flags and environment, its output kept for the test log.
type Daemon struct {
	cfg  DaemonConfig
	cmd  *exec.Cmd
	out  *SyncBuffer
	done chan struct{}
	err  error // how the process ended; written before done is closed
}

// StartDaemon starts the binary and kills it when the test ends, logging its output if the
// test failed.
func StartDaemon(tb testing.TB, cfg DaemonConfig) *Daemon {
	tb.Helper()
	d := &Daemon{cfg: cfg, out: &SyncBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(cfg.Binary, cfg.Args...)
	if cfg.Env != nil {
		d.cmd.Env = append(os.Environ(), cfg.Env...)
	}
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	// The child dies with the test binary even when the test is killed hard.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", cfg.Binary, err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	tb.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
		if tb.Failed() {
			tb.Logf("%s output:\n%s", cfg.Binary, d.out.String())
		}
	})
	return d
}

// Pid is the process id, e.g. to read its resource usage from /proc.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Output is everything the daemon wrote to stdout and stderr so far, interleaved.
func (d *Daemon) Output() string { return d.out.String() }

// Exited reports whether the process has ended.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Wait waits until the process ends by itself and returns how it ended (nil for exit code 0,
// an *exec.ExitError otherwise); it fails the test if the process is still running after timeout.
func (d *Daemon) Wait(tb testing.TB, timeout time.Duration) error {
	tb.Helper()
	select {
	case <-d.done:
		return d.err
	case <-time.After(timeout):
		tb.Fatalf("%s still running after %v", d.cfg.Binary, timeout)
		return nil
	}
}

// Stop sends SIGTERM and expects a clean exit (code 0) within a minute.
func (d *Daemon) Stop(tb testing.TB) {
	tb.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		tb.Fatalf("SIGTERM %s: %v", d.cfg.Binary, err)
	}
	if err := d.Wait(tb, daemonStopTimeout); err != nil {
		tb.Errorf("%s exit after SIGTERM: %v", d.cfg.Binary, err)
	}
}

// Kill ends the process with SIGKILL, as a crash or an OOM kill would, and waits until it is gone.
func (d *Daemon) Kill(tb testing.TB) {
	tb.Helper()
	if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		tb.Fatalf("SIGKILL %s: %v", d.cfg.Binary, err)
	}
	<-d.done
}

// Signal sends sig (SIGSTOP, SIGCONT, SIGTERM, ...) and returns at once.
func (d *Daemon) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("%v %s: %v", sig, d.cfg.Binary, err)
	}
}

// FailFast is the PollOption that ends a wait at once when the daemon has exited or the
// config's Abort reports trouble.
func (d *Daemon) FailFast() PollOption { return FailFast(d.trouble) }

func (d *Daemon) trouble() error {
	if d.Exited() {
		return fmt.Errorf("%s exited: %v", d.cfg.Binary, d.err)
	}
	if d.cfg.Abort != nil {
		return d.cfg.Abort()
	}
	return nil
}

// WaitForStatus GETs url until it answers want, within two minutes and while the daemon runs,
// and returns the body of that answer.
func (d *Daemon) WaitForStatus(tb testing.TB, url string, want int) string {
	tb.Helper()
	var body string
	Eventually(tb, daemonHTTPTimeout, fmt.Sprintf("%s answering %d", url, want), func() (bool, string) {
		status, b, err := httpGet(url)
		if err != nil {
			return false, err.Error()
		}
		body = b
		return status == want, fmt.Sprintf("status %d: %s", status, b)
	}, d.FailFast())
	return body
}

// MetricsAddr is the address of the daemon's /metrics, as configured.
func (d *Daemon) MetricsAddr() string { return d.cfg.MetricsAddr }

// Metric scrapes one sample from the daemon's /metrics, waiting until it answers. name is the
// sample as exposed, labels included (`x_total{result="ok"}`); a missing sample is 0, as a
// Prometheus counter not yet incremented is.
func (d *Daemon) Metric(tb testing.TB, name string) float64 {
	tb.Helper()
	if d.cfg.MetricsAddr == "" {
		tb.Fatal("Metric needs DaemonConfig.MetricsAddr")
	}
	body := d.WaitForStatus(tb, "http://"+d.cfg.MetricsAddr+"/metrics", http.StatusOK)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				tb.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	return 0
}

// httpClient bounds each request, so a server that accepts but never answers cannot hang a poll.
var httpClient = &http.Client{Timeout: 10 * time.Second}

// httpGet returns the status and body of a GET of url.
func httpGet(url string) (int, string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, "", fmt.Errorf("get %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("read %s: %w", url, err)
	}
	return resp.StatusCode, string(body), nil
}

// SyncBuffer is a bytes.Buffer safe to read while another goroutine or process writes into it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
