package watch

import (
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/configbutler/gitops-reverser/crds"
)

// Why a RemoteCluster's kubeconfig is read field by field: it is written by whoever may write
// Secrets in the RemoteCluster's namespace, and the client it makes runs in the daemon's container,
// with the daemon's disk, network and environment. clientcmd turns every field it knows into the
// client (files read from the daemon's disk, plugins run, a proxy, impersonation), and a later
// client-go may know more. So the client is built here from an allow-list, as Flux's runtime
// client builds the clients of its kubeconfigs: the server and how to trust it (CA data, TLS
// server name), and embedded credentials (a token, a client certificate and key). What would act
// with the daemon's means is refused, saying what to do instead; the plugin and the unverified
// certificate only where the daemon allows them. Everything else is ignored: the context's
// namespace, extensions, preferences, and whatever a client-go to come reads.

// execExtension is the cluster extension clientcmd hands to an exec plugin as its configuration.
const execExtension = "client.authentication.k8s.io/exec"

// connect builds the clients of a kubeconfig, refusing what would let its author act with the
// daemon's own means.
func connect(data []byte, fp string, spec crds.RemoteClusterSpec, allow RemoteOptions) (*connection, string, condition) {
	cfg, cond := restConfigOf(data, allow)
	if cfg == nil {
		return nil, "", cond
	}
	cfg.UserAgent = "gitops-reverser"
	cfg.QPS, cfg.Burst = float32(orDefault(spec.QPS, DefaultRemoteQPS)), int(orDefault(spec.Burst, DefaultRemoteBurst))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, "", notReady(ReasonKubeconfigInvalid, "build a client: %v", err)
	}
	api, err := streamClient(cfg)
	if err != nil {
		return nil, "", notReady(ReasonKubeconfigInvalid, "build a client: %v", err)
	}
	return &connection{fingerprint: fp, cfg: cfg, dyn: dyn, api: api}, cfg.Host, condition{}
}

// restConfigOf is the client configuration of the kubeconfig's current context, made only of the
// fields the daemon allows; nil, and why, when the kubeconfig may not be used.
func restConfigOf(data []byte, allow RemoteOptions) (*rest.Config, condition) {
	kc, err := clientcmd.Load(data) // parses only: it reads no file and runs nothing
	if err != nil {
		return nil, notReady(ReasonKubeconfigInvalid, "parse the kubeconfig: %v", err)
	}
	c := kc.Contexts[kc.CurrentContext]
	if c == nil {
		return nil, notReady(ReasonKubeconfigInvalid, "the kubeconfig has no current context %q", kc.CurrentContext)
	}
	cluster, user := kc.Clusters[c.Cluster], kc.AuthInfos[c.AuthInfo]
	if cluster == nil {
		return nil, notReady(ReasonKubeconfigInvalid, "the kubeconfig has no cluster %q", c.Cluster)
	}
	if user == nil {
		user = &clientcmdapi.AuthInfo{}
	}
	if cond := refuseKubeconfig(cluster, user, allow); cond.reason != "" {
		return nil, cond
	}
	host, cond := serverOf(cluster.Server, c.Cluster)
	if cond.reason != "" {
		return nil, cond
	}
	cfg := &rest.Config{
		Host:               host,
		BearerToken:        user.Token,
		DisableCompression: cluster.DisableCompression,
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: cluster.TLSServerName, CAData: cluster.CertificateAuthorityData,
			CertData: user.ClientCertificateData, KeyData: user.ClientKeyData,
			Insecure: cluster.InsecureSkipTLSVerify, // refused above unless allowed
		},
	}
	if user.Exec != nil { // refused above unless allowed
		exec := *user.Exec
		exec.Config = execConfigOf(cluster.Extensions)
		exec.InstallHint = "" // the author's text, shown in the errors the daemon reports: not ours to show
		cfg.ExecProvider = &exec
	}
	if user.AuthProvider != nil { // refused above unless allowed
		provider := *user.AuthProvider
		cfg.AuthProvider = &provider
	}
	return cfg, condition{}
}

// execConfigOf is what clientcmd hands to an exec plugin: the cluster's extension for it.
func execConfigOf(extensions map[string]runtime.Object) runtime.Object {
	return extensions[execExtension]
}

// serverOf is the apiserver's URL: https only, since the credentials go with every request
// (clientcmd would send none over plain HTTP, and connect anyway). A URL without a scheme is https.
func serverOf(server, clusterName string) (string, condition) {
	if server == "" {
		return "", notReady(ReasonKubeconfigInvalid, "the kubeconfig's cluster %q has no server", clusterName)
	}
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	u, err := url.Parse(server)
	switch {
	case err != nil || u.Host == "":
		return "", notReady(ReasonKubeconfigInvalid, "the kubeconfig's server %q is not a URL: %v", server, err)
	case u.Scheme != "https":
		return "", notReady(ReasonKubeconfigInvalid, "the kubeconfig's server %s is not https: its credentials would travel in clear; give the apiserver's https URL", server)
	}
	u.RawQuery, u.Fragment = "", "" // as clientcmd does: a path (a proxy's, e.g. Rancher's) is kept
	return u.String(), condition{}
}

// refuseKubeconfig says why a kubeconfig's cluster and user may not be used; zero when they may.
func refuseKubeconfig(cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo, allow RemoteOptions) condition {
	switch {
	case (user.Exec != nil || user.AuthProvider != nil) && !allow.AllowExec:
		return notReady(ReasonExecNotAllowed, "the kubeconfig runs a credential plugin, which the daemon would run in its own container: "+
			"use a token or a client certificate, or start the daemon with --remote-allow-exec")
	case cluster.InsecureSkipTLSVerify && !allow.AllowInsecure:
		return notReady(ReasonInsecureNotAllowed, "the kubeconfig skips the verification of the apiserver's certificate: "+
			"give certificate-authority-data, or start the daemon with --remote-allow-insecure")
	case user.TokenFile != "" || user.ClientCertificate != "" || user.ClientKey != "" || cluster.CertificateAuthority != "":
		return notReady(ReasonKubeconfigInvalid, "the kubeconfig names files, which would be read from the daemon's own disk: "+
			"embed them (token, client-certificate-data, client-key-data, certificate-authority-data)")
	case user.Username != "" || user.Password != "":
		return notReady(ReasonKubeconfigInvalid, "the kubeconfig uses basic authentication, which Kubernetes no longer offers: use a token or a client certificate")
	case cluster.ProxyURL != "":
		return notReady(ReasonKubeconfigInvalid, "the kubeconfig sends its requests through a proxy (proxy-url %s), which the daemon does not take "+
			"from a kubeconfig: remove it; the daemon reaches remote apiservers directly, or through its own HTTPS_PROXY", cluster.ProxyURL)
	case user.Impersonate != "" || user.ImpersonateUID != "" || len(user.ImpersonateGroups) > 0 || len(user.ImpersonateUserExtra) > 0:
		return notReady(ReasonKubeconfigInvalid, "the kubeconfig impersonates someone else (as, as-uid, as-groups, as-user-extra): "+
			"give the credentials of the identity the hub is to use there, and grant that identity what it needs")
	}
	return condition{}
}
