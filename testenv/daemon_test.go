package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeDaemonEnv makes the test binary play a daemon: "serve" serves /metrics until SIGTERM,
// "crash" exits with code 3 at once.
const fakeDaemonEnv = "TESTENV_FAKE_DAEMON"

func runFakeDaemon(mode string) int {
	fmt.Println("fake daemon: starting")
	if mode == "crash" {
		fmt.Fprintln(os.Stderr, "fake daemon: cannot start")
		return 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, "# TYPE fake_up gauge\nfake_up 1\nfake_requests_total{code=\"200\"} 2\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	fmt.Fprintln(os.Stderr, "fake daemon: serving")
	<-ctx.Done()
	_ = srv.Close()
	fmt.Fprintln(os.Stderr, "fake daemon: stopped")
	return 0
}

func startFakeDaemon(t *testing.T, mode string, abort func() error) *Daemon {
	t.Helper()
	addr := FreeAddr(t)
	return StartDaemon(t, DaemonConfig{Binary: os.Args[0], Args: []string{addr},
		Env: []string{fakeDaemonEnv + "=" + mode}, MetricsAddr: addr, Abort: abort})
}

func TestDaemonScrapesMetricsAndStopsCleanlyOnSIGTERM(t *testing.T) {
	d := startFakeDaemon(t, "serve", nil)
	for name, want := range map[string]float64{"fake_up": 1, `fake_requests_total{code="200"}`: 2, "fake_missing_total": 0} {
		if got := d.Metric(t, name); got != want {
			t.Errorf("Metric(%s) = %v, want %v", name, got, want)
		}
	}
	d.Stop(t)
	if !d.Exited() {
		t.Error("not exited after Stop")
	}
	for _, want := range []string{"fake daemon: starting", "fake daemon: serving", "fake daemon: stopped"} {
		if !strings.Contains(d.Output(), want) {
			t.Errorf("output lacks %q (stdout and stderr both count):\n%s", want, d.Output())
		}
	}
}

func TestDaemonPollsFailAtOnce(t *testing.T) {
	cases := []struct {
		name, mode string
		abort      func() error
		want       string
	}{
		{"when the daemon exited", "crash", nil, "exit status 3"},
		{"when the abort hook reports trouble", "serve", func() error { return errors.New("the apiserver refused get secrets") }, "refused get secrets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := startFakeDaemon(t, c.mode, c.abort)
			msg := failure(t, func(tb testing.TB) {
				Eventually(tb, time.Hour, "something that never happens", func() (bool, string) { return false, "" }, d.FailFast())
			})
			if !strings.Contains(msg, c.want) {
				t.Fatalf("failure %q, want it to say %q", msg, c.want)
			}
		})
	}
}

func TestDaemonWaitReportsHowItEnded(t *testing.T) {
	crashed := startFakeDaemon(t, "crash", nil)
	var exitErr *exec.ExitError
	if err := crashed.Wait(t, time.Minute); !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("crash: Wait = %v, want exit code 3", err)
	}
	if !strings.Contains(crashed.Output(), "cannot start") {
		t.Errorf("crash output lacks its reason:\n%s", crashed.Output())
	}

	killed := startFakeDaemon(t, "serve", nil)
	killed.Metric(t, "fake_up") // serving
	killed.Kill(t)
	if err := killed.Wait(t, time.Minute); !errors.As(err, &exitErr) || exitErr.ExitCode() != -1 {
		t.Errorf("kill: Wait = %v, want death by signal", err)
	}
}
