package watch

import (
	"slices"

	"github.com/configbutler/gitops-reverser/crds"
)

// Writer is a rule that selects a resource for a destination, with the ServiceAccount that
// write-back applies the rule's objects as (impersonation). The watch only names it: whether the
// ServiceAccount agreed was checked before the rule was admitted, and what it may write is the
// apiserver's to enforce when write-back writes as it.
type Writer struct {
	// Rule names the rule as people read it: "WatchRule team-a/apps", "ClusterWatchRule infra".
	Rule string
	// ServiceAccount is the rule's ServiceAccount; zero when it names none (and the daemon has no
	// --default-service-account): its objects are not written back.
	ServiceAccount crds.ServiceAccountReference
}

// watchRuleWriter is who write-back writes as for a WatchRule: its own ServiceAccount, else the
// daemon's default one in the rule's namespace, else nobody.
func (m *Manager) watchRuleWriter(r *crds.WatchRule) Writer {
	w := Writer{Rule: crds.KindWatchRule + " " + r.Namespace + "/" + r.Name}
	if sa := m.serviceAccountOf(r); sa != "" {
		w.ServiceAccount = crds.ServiceAccountReference{Namespace: r.Namespace, Name: sa}
	}
	return w
}

// clusterWatchRuleWriter is who write-back writes as for a ClusterWatchRule: the ServiceAccount
// its spec.serviceAccountRef names, else nobody.
func clusterWatchRuleWriter(r *crds.ClusterWatchRule) Writer {
	w := Writer{Rule: crds.KindClusterWatchRule + " " + r.Name}
	if ref := r.Spec.ServiceAccountRef; ref != nil {
		w.ServiceAccount = *ref
	}
	return w
}

// addWriter adds w to writers once.
func addWriter(writers []Writer, w Writer) []Writer {
	if slices.Contains(writers, w) {
		return writers
	}
	return append(writers, w)
}
