package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdminConfig authenticates as AdminUser (system:masters).
func (cp *ControlPlane) AdminConfig() *rest.Config {
	return cp.tokenConfig(AdminUser)
}

// UserConfig authenticates with the bearer token of one of Users. It panics on an unknown name:
// that is a bug in the test, not a condition to handle.
func (cp *ControlPlane) UserConfig(name string) *rest.Config {
	if _, ok := cp.tokens[name]; !ok {
		panic(fmt.Sprintf("testenv: unknown static user %q", name))
	}
	return cp.tokenConfig(name)
}

// ImpersonatingConfig acts as any user with any groups through the admin's impersonation right,
// e.g. ImpersonatingConfig("system:serviceaccount:ns:name", "system:serviceaccounts").
func (cp *ControlPlane) ImpersonatingConfig(user string, groups ...string) *rest.Config {
	cfg := cp.AdminConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

func (cp *ControlPlane) tokenConfig(user string) *rest.Config {
	return &rest.Config{
		Host:            cp.URL,
		BearerToken:     cp.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
		QPS:             1000,
		Burst:           2000,
	}
}

// CAPEM is the CA that signed the apiserver's serving certificate.
func (cp *ControlPlane) CAPEM() []byte { return cp.pki.caPEM }

// Transport is an HTTP transport that trusts the apiserver's serving certificate, for a proxy a
// test puts in front of it.
func (cp *ControlPlane) Transport() *http.Transport {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cp.pki.caPEM)
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
}

// WriteKubeconfig writes a kubeconfig for the admin user, for the daemon and kubectl.
func (cp *ControlPlane) WriteKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.tokens[AdminUser]}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	cfg.CurrentContext = "testenv"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// WriteUserKubeconfig writes a kubeconfig that authenticates with the bearer token of user, one
// of Users, as kubectl's would: its context's namespace is namespace ("" leaves it unset).
func (cp *ControlPlane) WriteUserKubeconfig(path, user, namespace string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: cp.UserConfig(user).BearerToken}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = user
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig of %s: %w", user, err)
	}
	return nil
}

// RunMain is the body of a package's TestMain: it starts one control plane shared by all tests of
// the package, stores it in *cp, runs the tests and stops it. Use as
// `func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &cp)) }`.
func RunMain(m *testing.M, cp **ControlPlane) int {
	started, err := Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer started.Stop()
	*cp = started
	return m.Run()
}
