package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is one child program (etcd or kube-apiserver) with its output in a log file.
type process struct {
	name    string
	path    string
	args    []string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

func (p *process) start() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// The child dies with the test binary even when the test is killed hard.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to terminate and kills it if it has not gone after a grace period.
func (p *process) stop(grace time.Duration) {
	if p.cmd == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail returns the end of the log, for error messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// freePorts reserves n distinct loopback ports by listening on :0, then releases them for the
// child processes. Holding all listeners until the end keeps the n ports distinct.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
