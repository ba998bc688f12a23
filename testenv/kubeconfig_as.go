package testenv

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfigAs writes a kubeconfig that authenticates as the admin and impersonates user with
// groups, so a program given it (the daemon, kubectl) gets exactly the permissions RBAC grants that
// identity and nothing of the admin's. A ServiceAccount is
// WriteKubeconfigAs(path, "system:serviceaccount:NS:NAME", "system:serviceaccounts",
// "system:serviceaccounts:NS", "system:authenticated"): the groups a real token of it carries.
func (cp *ControlPlane) WriteKubeconfigAs(path, user string, groups ...string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos["as"] = &clientcmdapi.AuthInfo{
		Token:             cp.tokens[AdminUser],
		Impersonate:       user,
		ImpersonateGroups: groups,
	}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "as"}
	cfg.CurrentContext = "testenv"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig as %s: %w", user, err)
	}
	return nil
}
