package watch

import (
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/configbutler/gitops-reverser/crds"
)

// TestKubeconfigsThatActWithTheDaemonsMeansAreRefused: a RemoteCluster's kubeconfig is written by
// whoever may write Secrets in its namespace. One that runs a plugin in the daemon's container,
// reads a file from its disk (its own ServiceAccount token, sent to a server of the author's
// choosing), or trusts any certificate is refused unless the daemon allows it.
func TestKubeconfigsThatActWithTheDaemonsMeansAreRefused(t *testing.T) {
	allowAll := RemoteOptions{AllowExec: true, AllowInsecure: true}
	cases := []struct {
		name    string
		user    clientcmdapi.AuthInfo
		cluster clientcmdapi.Cluster
		allow   RemoteOptions
		want    string
	}{
		{name: "token", user: clientcmdapi.AuthInfo{Token: "t"}},
		{name: "exec plugin", user: clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "sh"}}, want: ReasonExecNotAllowed},
		{name: "exec plugin allowed", user: clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "aws"}}, allow: allowAll},
		{name: "auth provider", user: clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc"}}, want: ReasonExecNotAllowed},
		{name: "insecure", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{InsecureSkipTLSVerify: true}, want: ReasonInsecureNotAllowed},
		{name: "insecure allowed", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{InsecureSkipTLSVerify: true}, allow: allowAll},
		{name: "the daemon's own token", user: clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}, allow: allowAll, want: ReasonKubeconfigInvalid},
		{name: "a client key on disk", user: clientcmdapi.AuthInfo{ClientCertificate: "/c", ClientKey: "/k"}, allow: allowAll, want: ReasonKubeconfigInvalid},
		{name: "a CA on disk", user: clientcmdapi.AuthInfo{Token: "t"}, cluster: clientcmdapi.Cluster{CertificateAuthority: "/ca"}, allow: allowAll, want: ReasonKubeconfigInvalid},
		{name: "basic auth", user: clientcmdapi.AuthInfo{Username: "u", Password: "p"}, want: ReasonKubeconfigInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kc := clientcmdapi.NewConfig()
			tc.cluster.Server = "https://remote:6443"
			kc.Clusters["c"], kc.AuthInfos["u"] = &tc.cluster, &tc.user
			kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
			kc.CurrentContext = "x"
			if got := refuseKubeconfig(kc, tc.allow); got.reason != tc.want {
				t.Errorf("reason %q (%s), want %q", got.reason, got.message, tc.want)
			}
		})
	}
}

// TestRemoteSelectionsStayInTheNamespacesAllowed: a WatchRule's namespace is mirrored only when
// the RemoteCluster names it; "every namespace" becomes one selection per named namespace; a
// cluster-scoped resource needs clusterScoped.
func TestRemoteSelectionsStayInTheNamespacesAllowed(t *testing.T) {
	cms := Selection{Namespaced: true}
	cms.GVR.Resource = "configmaps"
	nss := Selection{}
	nss.GVR.Resource = "namespaces"
	inTeam := cms
	inTeam.Namespace = "team-a"
	spec := crds.RemoteClusterSpec{Namespaces: []string{"shop", "web"}}
	got, refused := allowedNamespaces([]Selection{cms, inTeam, nss}, spec)
	if len(got) != 2 || got[0].Namespace != "shop" || got[1].Namespace != "web" {
		t.Errorf("selections %+v, want configmaps in shop and in web", got)
	}
	if len(refused) != 2 {
		t.Errorf("refused %v, want namespace team-a and namespaces (cluster-scoped)", refused)
	}
	if got, _ := allowedNamespaces([]Selection{cms}, crds.RemoteClusterSpec{}); len(got) != 0 {
		t.Errorf("a RemoteCluster naming no namespace allowed %+v", got)
	}
	if got, _ := allowedNamespaces([]Selection{cms, nss}, crds.RemoteClusterSpec{Namespaces: []string{"*"}, ClusterScoped: true}); len(got) != 2 || got[0].Namespace != "" {
		t.Errorf("* and clusterScoped: %+v, want both as they are", got)
	}
}
