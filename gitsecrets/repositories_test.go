package gitsecrets

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	// Every Secret watch a test started must have been joined by Run.
	os.Exit(testenv.RunMainNoLeaks(m, &cp, testenv.LeakIgnores()...))
}

// recordingPool is the pool's side of the boundary: it keeps what it was handed.
type recordingPool struct {
	mu    sync.Mutex
	repos map[string]gitops.Repository
}

func (p *recordingPool) SetRepositories(repos []gitops.Repository) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.repos = map[string]gitops.Repository{}
	for _, r := range repos {
		p.repos[r.Name] = r
	}
}

func (p *recordingPool) handed(name string) (gitops.Repository, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.repos[name]
	return r, ok
}

// TestSecretsReachThePool: a missing or unusable Secret keeps the repository from the pool with
// the reason; a usable one hands it over with its credentials, and a rotation reaches the pool
// through the watch, whose change is announced.
func TestSecretsReachThePool(t *testing.T) {
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gitsecrets-"}}
	ns, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 1)
	pool := &recordingPool{}
	r := New(Config{Dynamic: dynamic.NewForConfigOrDie(cp.AdminConfig()), Pool: pool, WorkDir: t.TempDir(), OnChange: func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	testenv.Run(t, r)
	repo := Repository{Name: ns.Name + "/repo", URL: "http://" + testenv.FreeAddr(t) + "/repo.git", SecretRef: &SecretRef{Namespace: ns.Name, Name: "creds"}}
	state := func() RepoState { return r.SetRepositories(ctx, []Repository{repo})[repo.Name] }

	if s := state(); s.Usable || s.Reason != "SecretInvalid" {
		t.Fatalf("without its Secret: %+v, want SecretInvalid", s)
	}
	if _, ok := pool.handed(repo.Name); ok {
		t.Fatal("a repository without credentials was handed to the pool")
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns.Name}, Data: map[string][]byte{"password": []byte("one")}}
	if secret, err = kube.CoreV1().Secrets(ns.Name).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var first string
	testenv.Eventually(t, 30*time.Second, "the credentials handed to the pool", func() (bool, string) {
		s := state()
		got, ok := pool.handed(repo.Name)
		first = got.Credentials.Key
		return s.Usable && ok && got.Credentials.Auth != nil, fmt.Sprintf("%+v", s)
	})

	for len(changed) > 0 {
		<-changed
	}
	secret.Data["password"] = []byte("two")
	if secret, err = kube.CoreV1().Secrets(ns.Name).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the rotation was not announced")
	}
	testenv.Eventually(t, 30*time.Second, "the rotated credentials handed to the pool", func() (bool, string) {
		state()
		got, _ := pool.handed(repo.Name)
		return got.Credentials.Key != first, got.Credentials.Key
	})

	secret.Data = map[string][]byte{"user": []byte("x")}
	if _, err := kube.CoreV1().Secrets(ns.Name).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the unusable Secret refused", func() (bool, string) {
		s := state()
		_, ok := pool.handed(repo.Name)
		return !s.Usable && s.Reason == "SecretInvalid" && !ok, fmt.Sprintf("%+v", s)
	})
	if err := kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}
