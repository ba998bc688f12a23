// Package testenv runs the real parts our tests and the demo need: a pinned etcd and kube-apiserver
// built from the Go module proxy and started on loopback, and Git remotes served over smart HTTP by
// `git http-backend`. Nothing here is a mock: the apiserver validates our CRDs, enforces RBAC, and
// calls our admission webhook over TLS exactly as a cluster would.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// AdminUser is the static token user of the control plane that is a member of system:masters.
const AdminUser = "testenv-admin"

// Users are the static token users every control plane knows, with their groups. They start with
// no permissions beyond what RBAC grants to system:authenticated; tests bind roles as they need.
var Users = map[string][]string{
	"alice":   {"developers"},
	"bob":     {"developers"},
	"carol":   {"operators"},
	"dave":    {"operators"},
	"mallory": {"outsiders"},
}

// ControlPlane is one running etcd + kube-apiserver pair with its data in a temporary directory.
type ControlPlane struct {
	// Dir holds the data, certificates and logs; removed by Stop.
	Dir string
	// URL is the apiserver's https://127.0.0.1:port.
	URL string
	// EtcdURL is etcd's client URL, for tests that change storage behind the apiserver's back.
	EtcdURL string

	tokens    map[string]string
	pki       pki
	etcd      *process
	apiserver *process
}

// Start builds (once) and starts a control plane on free loopback ports and waits until the
// apiserver reports ready.
func Start(ctx context.Context) (*ControlPlane, error) {
	bins, err := EnsureBinaries(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "testenv-")
	if err != nil {
		return nil, fmt.Errorf("create control plane dir: %w", err)
	}
	cp := &ControlPlane{Dir: dir}
	if err := cp.start(ctx, bins); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) start(ctx context.Context, bins Binaries) error {
	var err error
	if cp.pki, err = writePKI(cp.Dir); err != nil {
		return err
	}
	tokenFile, err := cp.writeTokens()
	if err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	cp.EtcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	cp.etcd = &process{
		name: "etcd", path: bins.Etcd, logPath: filepath.Join(cp.Dir, "etcd.log"),
		args: []string{
			"--name=testenv", "--data-dir=" + filepath.Join(cp.Dir, "etcd"),
			"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=testenv=" + peerURL, "--unsafe-no-fsync", "--log-level=warn",
		},
	}
	if err := cp.etcd.start(); err != nil {
		return err
	}
	if err := waitHealthy(ctx, cp.etcd, http.DefaultClient, etcdURL+"/health"); err != nil {
		return err
	}
	cp.apiserver = &process{
		name: "kube-apiserver", path: bins.KubeAPIServer, logPath: filepath.Join(cp.Dir, "kube-apiserver.log"),
		args: []string{
			// Kubernetes 1.37 refuses a loopback address with the endpoint reconciler, which keeps
			// the kubernetes Service's endpoints for in-cluster clients; there are none here.
			"--advertise-address=127.0.0.1", "--bind-address=127.0.0.1", "--endpoint-reconciler-type=none",
			"--secure-port=" + strconv.Itoa(ports[2]),
			"--etcd-servers=" + etcdURL,
			"--cert-dir=" + filepath.Join(cp.Dir, "certs"),
			"--tls-cert-file=" + cp.pki.serverCert, "--tls-private-key-file=" + cp.pki.serverKey,
			"--client-ca-file=" + cp.pki.caFile,
			"--token-auth-file=" + tokenFile,
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + cp.pki.saKey,
			"--service-account-signing-key-file=" + cp.pki.saKey,
			"--service-cluster-ip-range=10.96.0.0/16",
			"--allow-privileged=true",
			// There is no controller-manager to create the default ServiceAccount of each namespace.
			"--disable-admission-plugins=ServiceAccount",
		},
	}
	return cp.startAPIServer(ctx)
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	if err := cp.apiserver.start(); err != nil {
		return err
	}
	client, err := rest.HTTPClientFor(cp.AdminConfig())
	if err != nil {
		return fmt.Errorf("build admin client: %w", err)
	}
	return waitHealthy(ctx, cp.apiserver, client, cp.URL+"/readyz")
}

// RestartAPIServer stops the apiserver and starts it again on the same port with the same data,
// as a control-plane upgrade or crash would. Clients see connection errors and broken watches.
// meanwhile, if not nil, runs while the apiserver is down (e.g. to change etcd behind its back).
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, meanwhile func() error) error {
	cp.apiserver.stop(3 * time.Second) // open watches would hold a graceful stop for long

	if meanwhile != nil {
		if err := meanwhile(); err != nil {
			return errors.Join(err, cp.startAPIServer(ctx))
		}
	}
	return cp.startAPIServer(ctx)
}

// Stop terminates the apiserver, then etcd, and removes the data directory.
func (cp *ControlPlane) Stop() {
	if cp.apiserver != nil {
		cp.apiserver.stop(30 * time.Second)
	}
	if cp.etcd != nil {
		cp.etcd.stop(10 * time.Second)
	}
	_ = os.RemoveAll(cp.Dir)
}

// writeTokens gives the admin and every static user a random bearer token.
func (cp *ControlPlane) writeTokens() (string, error) {
	cp.tokens = map[string]string{}
	var lines []string
	add := func(user string, groups []string) {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		token := hex.EncodeToString(b)
		cp.tokens[user] = token
		lines = append(lines, fmt.Sprintf("%s,%s,%s,%q", token, user, user, strings.Join(groups, ",")))
	}
	add(AdminUser, []string{"system:masters"})
	for user, groups := range Users {
		add(user, groups)
	}
	path := filepath.Join(cp.Dir, "tokens.csv")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write token file: %w", err)
	}
	return path, nil
}

// waitHealthy polls url until it answers 200, the process exits, or the deadline passes.
func waitHealthy(ctx context.Context, p *process, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		if p.exited() {
			return fmt.Errorf("%s exited during start-up:\n%s", p.name, p.logTail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy at %s: %w (last: %w)\n%s", p.name, url, ctx.Err(), last, p.logTail())
		case <-tick.C:
		}
	}
}
