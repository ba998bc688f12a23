package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestRemoteChangesAreAttributedToTheirAuthors: the hub registers its webhook in each remote
// cluster at a path of that cluster's own, so a change alice makes on a remote is committed under
// her name. A review posted on another cluster's path is refused and credits nobody. A remote
// whose apiserver cannot reach the hub is reported, and its changes are credited to the bot.
func TestRemoteChangesAreAttributedToTheirAuthors(t *testing.T) {
	f := newFleet(t, "fleet-attribution", "east", "west")
	ctx := context.Background()
	east := kubernetes.NewForConfigOrDie(f.remotes["east"].AdminConfig())
	grantRole(t, east, f.remotes["east"], "shop", "editor", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get", "list", "create", "update", "patch"}}, "configmaps", "alice")
	webhookAddr := testenv.FreeAddr(t)
	link := newLink(t, webhookAddr) // the network between the clusters and the hub
	d := startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--webhook-bind-address", webhookAddr, "--webhook-url", "https://"+link.addr)
	f.file(d, "clusters/east/shop/configmaps/first.yaml", "1")
	hook := f.registered(d, "east")

	// The apiserver takes a moment to use a new registration: write until a review came.
	probes := 0
	testenv.Eventually(t, time.Minute, "east's apiserver calling the hub", func() (bool, string) {
		probes++
		f.configMap("east", "shop", "probe", string(rune('a'+probes%26)))
		rc := f.status("east")
		return rc.Status.Attribution == crds.AttributionWorking, rc.Status.Attribution
	}, d.FailFast())
	alice := kubernetes.NewForConfigOrDie(f.remotes["east"].UserConfig("alice"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-alice", Namespace: "shop"}, Data: map[string]string{"value": "5"}}
	if _, err := alice.CoreV1().ConfigMaps("shop").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.file(d, "clusters/east/shop/configmaps/by-alice.yaml", "5")
	if got := f.author("clusters/east/shop/configmaps/by-alice.yaml"); got != "alice" {
		t.Errorf("the remote change by alice was committed by %q", got)
	}

	// A review on west's path with east's token (or none) is refused; on east's own path it is taken.
	westPath := strings.Replace(hook.path, "/"+f.ns+"/east/", "/"+f.ns+"/west/", 1)
	for path, want := range map[string]int{hook.path: http.StatusOK, westPath: http.StatusForbidden, westPath + "x": http.StatusForbidden} {
		if got := hook.post(t, path); got != want {
			t.Errorf("a review posted on %s: status %d, want %d", path, got, want)
		}
	}
	if v := d.Metric(t, `gitops_reverser_admission_reviews_total{result="refused"}`); v < 2 {
		t.Errorf("refused reviews counted %v, want 2", v)
	}

	// East's apiserver can no longer reach the hub: its attribution is reported failing, and
	// alice's next change is credited to the bot.
	link.cut()
	patch := []byte(`{"data":{"value":"6"}}`)
	if _, err := alice.CoreV1().ConfigMaps("shop").Patch(ctx, "by-alice", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.file(d, "clusters/east/shop/configmaps/by-alice.yaml", "6")
	if got := f.author("clusters/east/shop/configmaps/by-alice.yaml"); got == "alice" {
		t.Errorf("a change the hub never heard of was credited to alice")
	}
	testenv.Eventually(t, 2*time.Minute, "east's attribution reported failing", func() (bool, string) {
		f.configMap("east", "shop", "probe", time.Now().Format("150405"))
		rc := f.status("east")
		return rc.Status.Attribution == crds.AttributionFailing, rc.Status.Attribution
	}, d.FailFast())

	// East is no longer mirrored: the hub's webhook is removed from it.
	if err := f.hubDyn.Resource(crds.GitDestinations).Namespace(f.ns).Delete(ctx, "east", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the hub's webhook removed from east", func() (bool, string) {
		_, err := east.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "gitops-reverser-hub", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	}, d.FailFast())
}

// registeredHook is the hub's webhook as a remote cluster's registration names it.
type registeredHook struct {
	base, path string
	client     *http.Client
}

// registered waits until the remote cluster name holds the hub's webhook registration.
func (f *fleet) registered(d *testenv.Daemon, name string) registeredHook {
	f.t.Helper()
	kube := kubernetes.NewForConfigOrDie(f.remotes[name].AdminConfig())
	var h registeredHook
	testenv.Eventually(f.t, time.Minute, "the hub's webhook registered in "+name, func() (bool, string) {
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), "gitops-reverser-hub", metav1.GetOptions{})
		if err != nil || len(cfg.Webhooks) == 0 || cfg.Webhooks[0].ClientConfig.URL == nil || len(cfg.Webhooks[0].Rules) == 0 {
			return false, "not yet"
		}
		url := *cfg.Webhooks[0].ClientConfig.URL
		i := strings.Index(url, "/admit/clusters/")
		h.base, h.path = url[:i], url[i:]
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle)
		h.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
		return true, ""
	}, d.FailFast())
	if own := "/admit/clusters/" + f.ns + "/" + name + "/"; !strings.HasPrefix(h.path, own) || len(h.path) < len(own)+64 {
		f.t.Fatalf("the registration's path %q is not the cluster's own with a token", h.path)
	}
	return h
}

// post sends a review of a ConfigMap update by mallory to path and returns the status.
func (h registeredHook) post(t *testing.T, path string) int {
	t.Helper()
	review := map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": map[string]any{
		"uid": "forged", "kind": map[string]any{"group": "", "version": "v1", "kind": "ConfigMap"},
		"resource": map[string]any{"group": "", "version": "v1", "resource": "configmaps"}, "namespace": "shop", "name": "first",
		"operation": "UPDATE", "userInfo": map[string]any{"username": "mallory"},
		"object": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "first", "namespace": "shop"}}}}
	body, _ := json.Marshal(review)
	resp, err := h.client.Post(h.base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// status reads a RemoteCluster.
func (f *fleet) status(name string) *crds.RemoteCluster {
	f.t.Helper()
	u, err := f.hubDyn.Resource(crds.RemoteClusters).Namespace(f.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	rc, err := crds.FromUnstructured[crds.RemoteCluster](u)
	if err != nil {
		f.t.Fatal(err)
	}
	return rc
}

// author is who made the newest commit that changed path.
func (f *fleet) author(path string) string {
	f.t.Helper()
	history, err := f.srv.History("state", f.branch(strings.Split(path, "/")[1]))
	if err != nil {
		f.t.Fatal(err)
	}
	for _, c := range history {
		if _, ok := c.Files[path]; ok {
			return c.AuthorName
		}
	}
	return ""
}

// link forwards TCP connections to a target until it is cut, as a network path does.
type link struct {
	addr   string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
	target string
}

func newLink(t *testing.T, target string) *link {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &link{addr: ln.Addr().String(), target: target}
	t.Cleanup(func() { _ = ln.Close(); l.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go l.forward(in)
		}
	}()
	return l
}

// retarget sends the connections opened from now on to target.
func (l *link) retarget(target string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target = target
}

func (l *link) forward(in net.Conn) {
	l.mu.Lock()
	target := l.target
	l.mu.Unlock()
	out, err := net.DialTimeout("tcp", target, 5*time.Second)
	l.mu.Lock()
	if err != nil || l.down {
		l.mu.Unlock()
		_ = in.Close()
		if out != nil {
			_ = out.Close()
		}
		return
	}
	l.conns = append(l.conns, in, out)
	l.mu.Unlock()
	go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
	_, _ = io.Copy(in, out)
	_ = in.Close()
}

// cut refuses every new connection and ends those open.
func (l *link) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = true
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}
