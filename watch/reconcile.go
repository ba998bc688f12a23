package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/shard"
)

// watcherSpec is one watcher to run: a selection and the destinations it feeds. Its signature
// changes whenever any of that changes, which restarts the watcher (a re-list writes the new
// destinations' files and is a no-op for the others).
type watcherSpec struct {
	sel     Selection
	targets []target
	// cluster and conn are the RemoteCluster watched and how; nil for the daemon's own cluster.
	cluster *remote
	conn    *connection
}

func (s *watcherSpec) signature() string {
	parts := []string{s.sel.Cluster, s.sel.GVR.String(), s.sel.Namespace}
	if s.conn != nil {
		parts = append(parts, s.conn.fingerprint) // a rotated kubeconfig lists again with it
	}
	for _, t := range s.targets {
		parts = append(parts, fmt.Sprintf("%s|%s|%d|%s|%s|%s|%s|%s", t.destination, t.baseFolder, t.ops, gitops.WorkerKey(t.url, t.branch),
			strings.Join(t.recipients, ","), t.filter, t.namespaces, t.adopted))
	}
	return strings.Join(parts, "\x00")
}

// reconcile brings workers and watchers in line with the configuration and reports status.
func (m *Manager) reconcile(ctx context.Context) error {
	repos := m.resolveRepos(ctx)
	m.access.forget()
	refused := &refusals{messages: map[string]string{}, byKind: map[string]int{}, serviceAccount: map[string]int{}}
	dests := resolveDestinations(list[crds.GitDestination](m, crds.GitDestinations), repos, m.refusal)
	m.resolveClusters(ctx, dests)
	for _, r := range m.remotes {
		r.denied = ""
	}
	m.publishAdmitted(dests)
	m.resolveEncryption(ctx, dests)
	m.shareOut(dests)
	m.reportRepos(ctx, repos, dests)
	byName := map[string]*destination{}
	for _, d := range dests {
		byName[d.name()] = d
	}
	specs := map[string]*watcherSpec{}
	errs := m.addWatchRules(ctx, specs, byName, refused)
	errs = append(errs, m.addClusterWatchRules(ctx, specs, byName)...)
	for _, d := range dests {
		m.tell(refused, crds.KindGitDestination, d.obj, d.cond)
	}
	m.keep(refused)
	m.matchNamespaces(specs)
	m.applyWatchers(ctx, dests, specs)
	m.writeCreationRules(dests)
	m.publishSelections(specs)
	m.clusterSelections = map[string]int{}
	for _, s := range specs {
		if s.sel.Cluster != "" {
			m.clusterSelections[s.sel.Cluster]++
		}
	}
	skipped := m.skippedByDestination()
	for _, d := range dests {
		if d.elsewhere {
			continue // its owner reports it
		}
		errs = append(errs, m.reporter.report(ctx, destinationKind, d.obj, d.obj.Status.Status, m.destinationCondition(d)),
			m.reporter.reportSkipped(ctx, d.obj, skipped[d.name()]), m.reportAdopted(ctx, d))
	}
	for name := range m.coalesced {
		if byName[name] == nil {
			delete(m.coalesced, name)
		}
	}
	for name := range m.progress {
		if byName[name] == nil {
			delete(m.progress, name)
		}
	}
	m.dests = dests
	errs = append(errs, m.reportProgress(ctx, dests), m.reportClusters(ctx))
	return errors.Join(errs...)
}

// addWatchRules expands every WatchRule into specs and reports its condition.
func (m *Manager) addWatchRules(ctx context.Context, specs map[string]*watcherSpec, byName map[string]*destination, refused *refusals) []error {
	var errs []error
	for _, r := range list[crds.WatchRule](m, crds.WatchRules) {
		rules := make([]ruleSpec, len(r.Spec.Rules))
		var invalid error
		for i, rr := range r.Spec.Rules {
			scope, err := scopeOf(rr.ObjectSelector, nil)
			invalid = cmp.Or(invalid, ruleError(i, err))
			rules[i] = ruleSpec{ResourceRule: rr, namespace: r.Namespace, scope: scope}
		}
		dest := byName[r.Spec.DestinationRef.NamespaceOr(r.Namespace)+"/"+r.Spec.DestinationRef.Name]
		var cond condition
		if why := m.refusedDestination(r.Namespace, dest); why != "" {
			cond = notReady(ReasonReferenceNotAllowed, "%s", why)
		} else if invalid != nil {
			cond = notReady("InvalidSelector", "%v", invalid)
		} else {
			cond = m.addRule(ctx, specs, ruleRef{crds.KindWatchRule, &r.ObjectMeta, m.serviceAccountOf(r), r.Spec.ServiceAccountName != "", m.watchRuleWriter(r)}, rules, dest)
		}
		m.tell(refused, crds.KindWatchRule, r, cond)
		errs = append(errs, m.reporter.report(ctx, watchRuleKind, r, r.Status, cond))
	}
	return errs
}

// addClusterWatchRules expands every ClusterWatchRule into specs and reports its condition.
func (m *Manager) addClusterWatchRules(ctx context.Context, specs map[string]*watcherSpec, byName map[string]*destination) []error {
	var errs []error
	for _, r := range list[crds.ClusterWatchRule](m, crds.ClusterWatchRules) {
		rules := make([]ruleSpec, len(r.Spec.Rules))
		var invalid error
		for i, rr := range r.Spec.Rules {
			scope, err := scopeOf(rr.ObjectSelector, rr.NamespaceSelector)
			invalid = cmp.Or(invalid, ruleError(i, err))
			rules[i] = ruleSpec{ResourceRule: rr.ResourceRule, clusterScoped: rr.Scope == crds.ScopeCluster, scope: scope}
		}
		dest := byName[r.Spec.DestinationRef.NamespaceOr(r.Namespace)+"/"+r.Spec.DestinationRef.Name]
		cond := notReady("InvalidSelector", "%v", invalid)
		if invalid == nil {
			cond = m.addRule(ctx, specs, ruleRef{kind: crds.KindClusterWatchRule, meta: &r.ObjectMeta, writer: clusterWatchRuleWriter(r)}, rules, dest)
		}
		errs = append(errs, m.reporter.report(ctx, clusterWatchRuleKind, r, r.Status, cond))
	}
	return errs
}

// shareOut tells the shards which (repository, branch) pairs the usable destinations ask for, and
// marks those another replica owns.
func (m *Manager) shareOut(dests []*destination) {
	if m.opts.Shards == nil {
		return
	}
	var keys []shard.Key
	for _, d := range dests {
		if d.usable {
			keys = append(keys, d.shard())
		}
	}
	m.opts.Shards.Want(keys)
	for _, d := range dests {
		d.elsewhere = d.usable && !m.opts.Shards.Owns(d.shard())
	}
}

// destinationCondition is the destination's resolved condition, unless its worker's last push
// failed. A coalesced queue is told once as a Warning Event.
func (m *Manager) destinationCondition(d *destination) condition {
	if !d.usable {
		return d.cond
	}
	if d.encryption.reason != "" {
		return d.encryption
	}
	if d.cluster != nil && !d.clusterState.cond.ready {
		return after(d.clusterState.cond, "ClusterNotReady", "RemoteCluster %s: %s", d.cluster.name, d.clusterState.cond.message)
	}
	st, ok := m.opts.Pool.WorkerStatus(d.repo.obj.Spec.RepoURL, d.obj.Lane())
	if !ok {
		return d.cond
	}
	if st.Coalesced > m.coalesced[d.name()] {
		m.coalesced[d.name()] = st.Coalesced
		m.reporter.recorder.Eventf(crds.ObjectReference(crds.KindGitDestination, d.obj), corev1.EventTypeWarning, "QueueCoalesced",
			"the remote %s@%s did not keep up: waiting changes were merged per file and are credited to the bot",
			d.repo.obj.Spec.RepoURL, d.obj.Spec.Branch)
	}
	if st.LastError != nil {
		return pushFailing(d, st.LastError)
	}
	return d.cond
}

// publishSelections makes what each destination selects, and how the mirror writes it, readable
// through Selections and Render. It stores a new map: what it published before is never changed.
func (m *Manager) publishSelections(specs map[string]*watcherSpec) {
	byDest := map[string]*destinationRules{}
	for _, s := range specs {
		for _, t := range s.targets {
			d := byDest[t.destination]
			if d == nil {
				d = &destinationRules{baseFolder: t.baseFolder}
				byDest[t.destination] = d
			}
			sel := s.sel
			sel.Ops, sel.filter = t.ops, t.filter // the destination's own, not those of whichever rule came first
			sel.Writers = slices.Clone(t.writers)
			d.selected = append(d.selected, selected{sel: sel, recipients: slices.Clone(t.recipients)})
		}
	}
	m.published.Store(&byDest)
}

type ruleRef struct {
	kind string
	meta *metav1.ObjectMeta
	// serviceAccount is the ServiceAccount of the rule's namespace whose rights bound what it
	// mirrors; "" for the daemon's own.
	serviceAccount string
	// named says the rule itself names serviceAccount, which must then agree to act for it.
	named bool
	// writer is who write-back writes the rule's objects as.
	writer Writer
}

// addRule expands one rule for its destination into specs and returns the rule's condition.
func (m *Manager) addRule(ctx context.Context, specs map[string]*watcherSpec, ref ruleRef, rules []ruleSpec, dest *destination) condition {
	switch {
	case dest == nil:
		return notReady("DestinationNotFound", "GitDestination not found")
	case !dest.usable:
		return after(dest.cond, "DestinationNotReady", "GitDestination %s is not ready: %s", dest.name(), dest.cond.message)
	}
	if dest.cluster != nil {
		return m.addRemoteRule(ctx, specs, ref, rules, dest)
	}
	sels, secrets := expand(rules, m.resources, m.opts.Expand, dest.recipients != nil)
	if secrets {
		m.warnSecrets(ref)
	}
	if len(sels) == 0 {
		return notReady("NothingSelected", "no served resource matches the rules (yet); discovery is refreshed every %s", m.opts.DiscoveryRefresh)
	}
	if slices.ContainsFunc(rules, func(r ruleSpec) bool { return r.scope.namespaces != nil }) && !m.namespacesCached() {
		return waitingFor("NamespacesNotCached", "waiting for the namespaces' labels, which the rules' namespaceSelector needs")
	}
	if refused, cond := m.serviceAccountRefuses(ctx, ref, sels); refused {
		return cond
	}
	return addSelections(specs, ref, sels, dest, nil, secrets)
}

// addSelections adds the selections of one rule for dest to specs, and returns the rule's
// condition.
func addSelections(specs map[string]*watcherSpec, ref ruleRef, sels []Selection, dest *destination, conn *connection, secrets bool) condition {
	names := make([]string, 0, len(sels))
	for _, sel := range sels {
		k := sel.Cluster + "|" + sel.GVR.String() + "|" + sel.Namespace
		spec := specs[k]
		if spec == nil {
			spec = &watcherSpec{sel: sel, cluster: dest.cluster, conn: conn}
			specs[k] = spec
		}
		if i := slices.IndexFunc(spec.targets, func(t target) bool { return t.destination == dest.name() }); i >= 0 {
			spec.targets[i].ops |= sel.Ops
			spec.targets[i].filter = spec.targets[i].filter.and(sel.filter)
			spec.targets[i].writers = addWriter(spec.targets[i].writers, ref.writer)
		} else {
			t := target{destination: dest.name(), baseFolder: dest.obj.Spec.BaseFolder, ops: sel.Ops, filter: sel.filter,
				url: dest.repo.obj.Spec.RepoURL, branch: dest.obj.Lane(), writers: []Writer{ref.writer}, adopted: adoptedOf(dest.obj)}
			if isSecrets(sel) {
				t.recipients = dest.recipients
			}
			spec.targets = append(spec.targets, t)
		}
		names = append(names, sel.GVR.GroupResource().String())
	}
	slices.Sort(names)
	names = slices.Compact(names)
	msg := fmt.Sprintf("mirroring %d resources to %s: %s", len(names), dest.name(), strings.Join(names, ", "))
	if dest.cluster != nil {
		msg = fmt.Sprintf("mirroring %d resources of RemoteCluster %s to %s: %s", len(names), dest.cluster.name, dest.name(), strings.Join(names, ", "))
	}
	if secrets {
		msg += "; Secrets are selected but never written in plain text (name them in resources, with spec.encryption on the destination, to mirror them encrypted)"
	}
	return condition{ready: true, reason: "Watching", message: msg}
}

// serviceAccountRefuses says whether the rule's ServiceAccount keeps it from mirroring sels, and
// the condition that says why: a WatchRule reads Secrets only as a ServiceAccount, one it names
// must have agreed to act for it, and the ServiceAccount must be allowed to list and watch them.
func (m *Manager) serviceAccountRefuses(ctx context.Context, ref ruleRef, sels []Selection) (bool, condition) {
	if ref.kind == crds.KindWatchRule && ref.serviceAccount == "" && slices.ContainsFunc(sels, isSecrets) {
		return true, notReady(ReasonServiceAccountNotAllowed, "the rules select Secrets, which the daemon never reads for a WatchRule with its own rights: "+
			"name a ServiceAccount of namespace %s that may list and watch secrets there in spec.serviceAccountName (or set the daemon's --default-service-account)",
			ref.meta.Namespace)
	}
	if ref.named {
		sa := crds.ServiceAccountReference{Namespace: ref.meta.Namespace, Name: ref.serviceAccount}
		if why := m.access.consentMissing(ctx, sa, ref.meta.Name); why != "" {
			return true, notReady(ReasonServiceAccountConsentMissing, "%s", why)
		}
	}
	if ref.serviceAccount != "" {
		if why := m.access.unreadable(ctx, ref.meta.Namespace, ref.serviceAccount, sels); why != "" {
			return true, notReady(ReasonServiceAccountNotAllowed, "%s", why)
		}
	}
	return false, condition{}
}

func (m *Manager) warnSecrets(ref ruleRef) {
	k := fmt.Sprintf("%s/%d", ref.meta.UID, ref.meta.Generation)
	if m.warned[k] {
		return
	}
	m.warned[k] = true
	m.opts.Metrics.SecretsSkipped.Inc()
	m.reporter.recorder.Event(crds.ObjectReference(ref.kind, ref.meta), corev1.EventTypeWarning, "SecretsSkipped",
		"the rules select Secrets; they are never written to Git in plain text and are skipped (name secrets in resources, with spec.encryption on the destination, to mirror them encrypted)")
}

// applyWatchers stops the watchers no longer wanted, asks the pool for exactly the workers the
// destinations this replica writes need, then starts the new watchers. The admission webhook is
// told every selection, those of destinations other replicas own included: whichever replica the
// apiserver calls records who made the change, for the owner.
func (m *Manager) applyWatchers(ctx context.Context, dests []*destination, specs map[string]*watcherSpec) {
	elsewhere := map[string]bool{}
	for _, d := range dests {
		if d.elsewhere {
			elsewhere[d.name()] = true
		}
	}
	wantWatchers := map[string]*watcherSpec{}
	for _, s := range specs {
		own := &watcherSpec{sel: s.sel, cluster: s.cluster, conn: s.conn}
		for _, t := range s.targets {
			if !elsewhere[t.destination] {
				own.targets = append(own.targets, t)
			}
		}
		if len(own.targets) > 0 {
			wantWatchers[own.signature()] = own
		}
	}
	for sig, w := range m.watchers {
		if wantWatchers[sig] == nil {
			w.stop()
			delete(m.watchers, sig)
		}
	}
	var branches []gitops.Branch
	for _, d := range dests {
		if d.ours() {
			branches = append(branches, gitops.Branch{Repo: d.repo.obj.Namespace + "/" + d.repo.obj.Name, Branch: d.obj.Spec.Branch,
				Request: requestSettings(d)})
		}
	}
	m.opts.Pool.SetWorkers(branches)
	for sig, s := range wantWatchers {
		if m.watchers[sig] == nil {
			m.watchers[sig] = m.startWatcher(ctx, s)
		}
	}
	m.opts.Metrics.Watches.Set(float64(len(m.watchers)))
	if m.opts.OnWatched != nil {
		sels := make([]Selection, 0, len(specs))
		served := map[string]bool{} // the RemoteClusters this replica watches
		for _, w := range wantWatchers {
			served[w.sel.Cluster] = true
		}
		for _, s := range specs {
			sel := s.sel
			sel.Elsewhere = sel.Cluster != "" && !served[sel.Cluster]
			for _, t := range s.targets {
				sel.Ops |= t.ops
			}
			sels = append(sels, sel)
		}
		m.opts.OnWatched(ctx, sels)
	}
}

func (m *Manager) startWatcher(ctx context.Context, s *watcherSpec) *running {
	ctx, cancel := context.WithCancel(ctx)
	for i := range s.targets {
		sink, ok := m.opts.Pool.Sink(s.targets[i].url, s.targets[i].branch)
		if !ok {
			sink = stoppedSink{}
		}
		s.targets[i].sink = sink
	}
	dyn, api, authors := m.dyn, m.api, m.opts.Authors
	var seen func()
	if s.conn != nil {
		dyn, api, seen = s.conn.dyn, s.conn.api, s.cluster.seen
		authors = noAuthors{}
		if m.opts.ClusterAuthors != nil {
			authors = m.opts.ClusterAuthors(s.sel.Cluster)
		}
	}
	client := dyn.Resource(s.sel.GVR)
	w := &watcher{
		sel: s.sel, targets: s.targets, metrics: m.opts.Metrics, client: client, dyn: client, authors: authors, sealer: m.opts.Sealer, seen: seen,
		recorder: m.reporter.recorder, skipped: newSkipCounts(len(s.targets)),
		log: m.opts.Log.With("resource", s.sel.GVR.GroupResource().String(), "version", s.sel.GVR.Version, "namespace", s.sel.Namespace),
	}
	if s.sel.Namespace != "" {
		w.client = client.Namespace(s.sel.Namespace)
	}
	if s.sel.Cluster != "" {
		w.log = w.log.With("cluster", s.sel.Cluster)
	}
	w.stream = newCollection(api, s.sel.GVR, s.sel.Kind, s.sel.Namespace)
	w.stream.fieldSets = slices.ContainsFunc(s.targets, func(t target) bool { return t.adopted != nil })
	w.selecting(m.namespaceLabels)
	dests := make([]string, len(s.targets))
	for i, t := range s.targets {
		dests[i] = t.destination
	}
	w.log.Info("watching", "destinations", dests)
	r := &running{cancel: cancel, done: make(chan struct{}), w: w}
	go func() {
		defer close(r.done)
		w.run(ctx)
	}()
	return r
}

// stoppedSink stands in for a worker the pool does not run (it is shutting down): the watcher
// backs off and lists again once the configuration settles.
type stoppedSink struct{}

func (stoppedSink) Enqueue(gitops.Change) error { return gitops.ErrStopped }
func (stoppedSink) Sync(gitops.Sync) error      { return gitops.ErrStopped }
