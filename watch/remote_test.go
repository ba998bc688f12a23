package watch

import (
	"testing"

	"github.com/configbutler/gitops-reverser/crds"
)

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
