package watch

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// kubeconfigOf is a kubeconfig whose current context joins cluster and user, as a Secret holds it.
func kubeconfigOf(t *testing.T, cluster clientcmdapi.Cluster, user clientcmdapi.AuthInfo) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"], kc.AuthInfos["u"] = &cluster, &user
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: "team-a"}
	kc.CurrentContext = "x"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestKubeconfigsThatActWithTheDaemonsMeansAreRefused: a RemoteCluster's kubeconfig is written by
// whoever may write Secrets in its namespace. One that runs a plugin in the daemon's container,
// reads a file from its disk (its own ServiceAccount token, sent to a server of the author's
// choosing), trusts any certificate, sends its requests through a proxy of the author's choosing,
// acts as someone else, or would send its credentials in clear, is refused, each saying why,
// unless the daemon allows it.
func TestKubeconfigsThatActWithTheDaemonsMeansAreRefused(t *testing.T) {
	allowAll := RemoteOptions{AllowExec: true, AllowInsecure: true}
	const server = "https://remote.example:6443"
	cases := []struct {
		name    string
		user    clientcmdapi.AuthInfo
		cluster clientcmdapi.Cluster
		allow   RemoteOptions
		want    string // the reason; "" for accepted
		says    string // what the message says
	}{
		{name: "token", user: clientcmdapi.AuthInfo{Token: "t"}},
		{name: "exec plugin", user: clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}},
			want: ReasonExecNotAllowed, says: "--remote-allow-exec"},
		{name: "exec plugin allowed", user: clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}, allow: allowAll},
		{name: "auth provider", user: clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc"}}, want: ReasonExecNotAllowed},
		{name: "insecure", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{InsecureSkipTLSVerify: true}, want: ReasonInsecureNotAllowed,
			says: "certificate-authority-data"},
		{name: "insecure allowed", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{InsecureSkipTLSVerify: true}, allow: allowAll},
		{name: "the daemon's own token", user: clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}, allow: allowAll,
			want: ReasonKubeconfigInvalid, says: "names files"},
		{name: "a token and the daemon's own token file", user: clientcmdapi.AuthInfo{Token: "t", TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"},
			allow: allowAll, want: ReasonKubeconfigInvalid, says: "names files"},
		{name: "a client key on disk", user: clientcmdapi.AuthInfo{ClientCertificate: "/c", ClientKey: "/k"}, allow: allowAll, want: ReasonKubeconfigInvalid, says: "names files"},
		{name: "a CA on disk", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{CertificateAuthority: "/ca"}, allow: allowAll,
			want: ReasonKubeconfigInvalid, says: "names files"},
		{name: "basic auth", user: clientcmdapi.AuthInfo{Username: "u", Password: "p"}, want: ReasonKubeconfigInvalid, says: "basic authentication"},
		{name: "a proxy", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{ProxyURL: "socks5://127.0.0.1:1080"}, allow: allowAll,
			want: ReasonKubeconfigInvalid, says: "proxy-url"},
		{name: "acting as someone else", user: clientcmdapi.AuthInfo{Token: "t", Impersonate: "system:admin", ImpersonateGroups: []string{"system:masters"}},
			allow: allowAll, want: ReasonKubeconfigInvalid, says: "impersonat"},
		{name: "acting in other groups", user: clientcmdapi.AuthInfo{Token: "t", ImpersonateGroups: []string{"system:masters"}},
			allow: allowAll, want: ReasonKubeconfigInvalid, says: "impersonat"},
		{name: "credentials in clear", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{Server: "http://remote.example:8080"}, allow: allowAll,
			want: ReasonKubeconfigInvalid, says: "https"},
		{name: "no server", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{Server: "-"}, want: ReasonKubeconfigInvalid, says: "server"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			switch tc.cluster.Server {
			case "":
				tc.cluster.Server = server
			case "-":
				tc.cluster.Server = ""
			}
			conn, _, got := connect(kubeconfigOf(t, tc.cluster, tc.user), "fp", crds.RemoteClusterSpec{}, tc.allow)
			if got.reason != tc.want || !strings.Contains(got.message, tc.says) {
				t.Errorf("reason %q (%s), want %q saying %q", got.reason, got.message, tc.want, tc.says)
			}
			if (conn != nil) != (tc.want == "") {
				t.Errorf("connection %v with reason %q", conn != nil, got.reason)
			}
		})
	}
}

// TestKubeconfigReachesTheClientOnlyByItsAllowedFields: the client of a kubeconfig is built from
// the server, how to trust it (CA data, TLS server name) and the embedded credentials; nothing
// else it says reaches the client: not a namespace, extensions, nor any field a client-go to come
// would read from the daemon's disk.
func TestKubeconfigReachesTheClientOnlyByItsAllowedFields(t *testing.T) {
	ext := map[string]runtime.Object{"client.authentication.k8s.io/exec": &runtime.Unknown{Raw: []byte(`{"tokenFile":"/var/run/secrets/kubernetes.io/serviceaccount/token"}`)}}
	cluster := clientcmdapi.Cluster{Server: "https://remote.example:6443/k8s/clusters/c-1", CertificateAuthorityData: []byte("ca"), TLSServerName: "kubernetes",
		DisableCompression: true, Extensions: ext}
	user := clientcmdapi.AuthInfo{Token: "t", ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key"), Extensions: ext}
	cfg, cond := restConfigOf(kubeconfigOf(t, cluster, user), RemoteOptions{})
	if cond.reason != "" {
		t.Fatalf("refused: %s: %s", cond.reason, cond.message)
	}
	got := *cfg
	want := rest.Config{Host: "https://remote.example:6443/k8s/clusters/c-1", BearerToken: "t", DisableCompression: true,
		TLSClientConfig: rest.TLSClientConfig{ServerName: "kubernetes", CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("client configuration:\n got %#v\nwant %#v", got, want)
	}
}

// TestAGoodKubeconfigConnects: a kubeconfig with an embedded token and CA, and a TLS server name,
// reaches a real apiserver; the TLS server name is honoured (a wrong one fails the handshake).
func TestAGoodKubeconfigConnects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := cp.AdminConfig()
	for name, tc := range map[string]struct {
		serverName string
		works      bool
	}{
		"named as its certificate names it": {"kubernetes", true},
		"named otherwise":                   {"elsewhere.invalid", false},
	} {
		t.Run(name, func(t *testing.T) {
			data := kubeconfigOf(t, clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.CAPEM(), TLSServerName: tc.serverName},
				clientcmdapi.AuthInfo{Token: admin.BearerToken})
			conn, server, cond := connect(data, "fp", crds.RemoteClusterSpec{}, RemoteOptions{})
			if conn == nil {
				t.Fatalf("refused: %s: %s", cond.reason, cond.message)
			}
			if server != cp.URL {
				t.Errorf("server %q, want %q", server, cp.URL)
			}
			_, err := serverVersion(ctx, conn.api)
			if tc.works && err == nil {
				_, err = kube.For(conn.dyn, kube.Namespaces, "").List(ctx, metav1.ListOptions{Limit: 1})
			}
			if (err == nil) != tc.works {
				t.Errorf("works %v (err %v), want %v", err == nil, err, tc.works)
			}
		})
	}
}
