package watch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/crds"
)

var remoteClusterKind = ourKind{crds.RemoteClusters, crds.KindRemoteCluster}

// remoteClusterCache returns what starts the cache of RemoteClusters, once: from the first
// reconcile that meets a destination with spec.clusterRef. Without one they cost nothing.
func (m *Manager) remoteClusterCache(ctx context.Context, informers *sync.WaitGroup) func() bool {
	var start sync.Once
	return func() bool {
		start.Do(func() {
			inf := m.configInformer(crds.RemoteClusters)
			if _, err := inf.AddEventHandler(m.pokeOnChange()); err != nil {
				m.opts.Log.Error("follow RemoteClusters", "err", err)
				return
			}
			m.remoteClusters = inf
			informers.Go(func() { inf.RunWithContext(ctx) })
		})
		return m.remoteClusters != nil && m.remoteClusters.HasSynced()
	}
}

// resolveClusters connects every usable destination that names a RemoteCluster to it: the
// cluster exists and admits the destination's namespace, else the destination is not usable.
// Clusters no destination uses any longer are let go.
func (m *Manager) resolveClusters(ctx context.Context, dests []*destination) {
	used := map[string]*connection{} // the connection of each cluster in use; nil while it is not connected
	for _, d := range dests {
		ref := d.obj.Spec.ClusterRef
		if !d.usable || ref == nil {
			continue
		}
		ns := ref.NamespaceOr(d.obj.Namespace)
		name := ns + "/" + ref.Name
		if !m.cacheRemoteClusters() {
			d.usable, d.cond = false, waitingFor("ClusterNotCached", "waiting for the RemoteClusters to be cached")
			continue
		}
		item, ok, _ := m.remoteClusters.GetStore().GetByKey(name)
		if !ok {
			d.usable, d.cond = false, notReady("ClusterNotFound", "RemoteCluster %s not found", name)
			continue
		}
		obj, err := crds.FromUnstructured[crds.RemoteCluster](item.(*unstructured.Unstructured))
		if err != nil {
			d.usable, d.cond = false, notReady("ClusterNotFound", "RemoteCluster %s: %v", name, err)
			continue
		}
		if why := m.refusal("spec.clusterRef", d.obj.Namespace, crds.KindRemoteCluster, ns, ref.Name, obj.Spec.AccessPolicy); why != "" {
			d.usable, d.cond = false, notReady(ReasonReferenceNotAllowed, "%s", why)
			continue
		}
		r := m.remotes[name]
		if r == nil {
			r = m.startRemote(ctx, obj)
			m.remotes[name] = r
		} else if old := r.obj.Swap(obj); old.Generation != obj.Generation {
			r.kick.Notify()
		}
		d.cluster, d.clusterState = r, r.snapshot()
		if d.clusterState.cond.ready {
			used[name] = d.clusterState.conn
		} else if _, known := used[name]; !known {
			used[name] = nil
		}
	}
	m.clustersUsed.Store(&used)
	for name, r := range m.remotes {
		if _, ok := used[name]; !ok {
			r.stop()
			delete(m.remotes, name)
			m.forgetClusterMetrics(name)
		}
	}
}

// reportClusters writes the metrics of every RemoteCluster this replica serves, and the status of
// those it reports (reportedHere).
func (m *Manager) reportClusters(ctx context.Context) error {
	watches := map[string]int{} // this replica's own, for its metrics
	for _, w := range m.watchers {
		watches[w.w.sel.Cluster]++
	}
	served := map[string]bool{} // the clusters of destinations this replica writes: their owner reports the others
	for _, d := range m.dests {
		if d.cluster != nil && d.ours() {
			served[d.cluster.name] = true
		}
	}
	reports := reportedHere(m.dests)
	var errs []error
	for name, r := range m.remotes {
		if !served[name] {
			m.forgetClusterMetrics(name)
			continue
		}
		st, obj := r.snapshot(), r.obj.Load()
		cond := st.cond
		if cond.ready && r.denied != "" {
			cond = notReady(ReasonForbidden, "%s", r.denied)
		}
		attribution, told := crds.AttributionOff, ""
		if m.opts.ClusterAttribution != nil {
			attribution, told = m.opts.ClusterAttribution(name, r.lastEvent.Load())
		}
		if told != "" && cond.ready {
			cond.message += "; " + told
		}
		ready := 0.0
		if cond.ready {
			ready = 1
		}
		m.opts.Metrics.ClusterReady.WithLabelValues(name).Set(ready)
		m.opts.Metrics.ClusterWatches.WithLabelValues(name).Set(float64(watches[name]))
		if t := r.lastEvent.Load(); t != 0 {
			m.opts.Metrics.ClusterLastEvent.WithLabelValues(name).Set(float64(t) / 1e9)
		}
		if !reports[name] {
			continue
		}
		errs = append(errs, m.reporter.report(ctx, remoteClusterKind, obj, obj.Status.Status, cond))
		if want := remoteStatus(st, m.clusterSelections[name], r.lastEvent.Load(), attribution); !sameRemoteStatus(obj.Status, want) {
			var last any
			if want.LastEventTime != nil {
				last = want.LastEventTime
			}
			errs = append(errs, m.reporter.patchStatusFields(ctx, remoteClusterKind, obj, map[string]any{"server": want.Server, "version": want.Version,
				"resources": want.Resources, "watches": want.Watches, "attribution": want.Attribution, "lastEventTime": last}))
		}
	}
	return errors.Join(errs...)
}

// reportedHere says, by RemoteCluster in use, whether this replica writes its status: the one that
// owns the first usable destination (by namespace/name) that names it. Every replica sees the
// same destinations and one owns each shard, so two replicas whose destinations share a cluster
// never both write its status, each with its own view (its own watches, its own last event),
// undoing the other's write at every reconcile. Each keeps its metrics of the cluster: they are
// its own.
func reportedHere(dests []*destination) map[string]bool {
	first := map[string]*destination{}
	for _, d := range dests {
		if !d.usable || d.cluster == nil {
			continue
		}
		if f := first[d.cluster.name]; f == nil || d.name() < f.name() {
			first[d.cluster.name] = d
		}
	}
	out := make(map[string]bool, len(first))
	for name, d := range first {
		out[name] = d.ours()
	}
	return out
}

// forgetClusterMetrics drops the series of a cluster this replica does not (or no longer) serve.
func (m *Manager) forgetClusterMetrics(name string) {
	for _, g := range []*prometheus.GaugeVec{m.opts.Metrics.ClusterReady, m.opts.Metrics.ClusterWatches, m.opts.Metrics.ClusterLastEvent} {
		g.DeleteLabelValues(name)
	}
}

func (m *Manager) stopRemotes() {
	for name, r := range m.remotes {
		r.stop()
		delete(m.remotes, name)
	}
}

// addRemoteRule expands one rule for a destination of a RemoteCluster: from that cluster's
// discovery, bounded by the namespaces and the cluster scope its RemoteCluster allows, and by
// what the kubeconfig's identity may read there (the cluster's own RBAC, not the hub's
// ServiceAccounts: they mean nothing there).
func (m *Manager) addRemoteRule(ctx context.Context, specs map[string]*watcherSpec, ref ruleRef, rules []ruleSpec, dest *destination) condition {
	r, st := dest.cluster, dest.clusterState
	if st.conn == nil || st.resources == nil {
		return after(st.cond, "ClusterNotReady", "RemoteCluster %s: %s", r.name, st.cond.message)
	}
	if slices.ContainsFunc(rules, func(r ruleSpec) bool { return r.scope.namespaces != nil }) {
		return notReady("InvalidSelector", "a namespaceSelector selects by the labels of the daemon's own namespaces, not those of RemoteCluster %s: "+
			"name the namespaces in the RemoteCluster's spec.namespaces instead", r.name)
	}
	sels, secrets := expand(rules, st.resources, m.opts.Expand, dest.recipients != nil)
	if secrets {
		m.warnSecrets(ref)
	}
	sels, refused := allowedNamespaces(sels, r.obj.Load().Spec)
	if len(sels) == 0 {
		if len(refused) > 0 {
			return notReady("NamespaceNotAllowed", "RemoteCluster %s does not allow %s: its owner adds them to spec.namespaces (or sets spec.clusterScoped)",
				r.name, strings.Join(refused, ", "))
		}
		return notReady("NothingSelected", "no resource RemoteCluster %s serves matches the rules (yet)", r.name)
	}
	for i := range sels {
		sels[i].Cluster = r.name
	}
	if why := r.unreadable(ctx, st.conn, sels); why != "" {
		r.denied = why
		return notReady(ReasonForbidden, "%s", why)
	}
	return addSelections(specs, ref, sels, dest, st.conn, secrets)
}

// ClusterConfig is the client configuration of the RemoteCluster name ("namespace/name") as of
// the last reconcile: the identity of its kubeconfig, with its limits; false when no destination
// uses it or it is not connected. Callers copy it before changing it. Safe from any goroutine.
func (m *Manager) ClusterConfig(name string) (*rest.Config, bool) {
	cfg, _, ok := m.ClusterConn(name)
	return cfg, ok
}

// ClusterInUse says whether a GitDestination the last reconcile found usable names the
// RemoteCluster name ("namespace/name"), connected or not. Safe from any goroutine.
func (m *Manager) ClusterInUse(name string) bool {
	p := m.clustersUsed.Load()
	if p == nil {
		return false
	}
	_, ok := (*p)[name]
	return ok
}

// ClusterConn is ClusterConfig with the fingerprint of the kubeconfig it was made from (and the
// limits): it changes whenever the Secret is rotated.
func (m *Manager) ClusterConn(name string) (cfg *rest.Config, fingerprint string, ok bool) {
	p := m.clustersUsed.Load()
	if p == nil {
		return nil, "", false
	}
	c := (*p)[name]
	if c == nil {
		return nil, "", false
	}
	return c.cfg, c.fingerprint, true
}
