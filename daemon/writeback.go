package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/shard"
	"github.com/configbutler/gitops-reverser/watch"
	"github.com/configbutler/gitops-reverser/writeback"
)

// loadHoldsTimeout bounds the wait for the pending proposals before the mirror starts.
const loadHoldsTimeout = 15 * time.Second

// writeBack is the Git → cluster flow beside the mirror. It is optional: while it cannot read
// its kinds (no RBAC for proposals or syncruns) it is degraded and retries; the mirror runs on.
type writeBack struct {
	ctl       *writeback.Controller
	dyn       dynamic.Interface
	optional  *optionalParts
	log       *slog.Logger
	namespace string // the daemon's, where the key of the proposals' seals lives
}

// writeBackDeps are the parts write-back uses: the mirror's pool, selections and own commits, the
// record of who decided each proposal (nil without the webhook), the credits of its applies, the
// fences of the mirror's pushes, which fence its applies too (nil without leader election), and
// the shards this replica owns (nil without --shards=auto).
type writeBackDeps struct {
	mirror  *mirror
	attr    *attribution
	credits *writeback.Credits
	fences  gitops.Fences
	shards  *shard.Set
	// approverPolicy is --approver-policy; sealName the Secret of the key of the proposals' seals.
	approverPolicy crds.ApproverPolicy
	sealName       string
}

func newWriteBack(ctx context.Context, s shared, cfg WriteBackConfig, d writeBackDeps) (*writeBack, error) {
	mr, attr, log := d.mirror, d.attr, s.log
	wc := writeback.Config{
		Kube: s.kube, Git: mr.pool, Selections: selections(mr.manager), Credits: d.credits, Ours: mr.ours,
		Interval: cfg.Interval, MaxPerTick: cfg.MaxPerTick, Halt: cfg.Halt,
		Retention: cfg.Retention, FailedRetention: cfg.FailedRetention, ProposalRetention: cfg.ProposalRetention,
		Fences:  d.fences,
		Metrics: s.reg.WriteBack, Log: log.With("part", metrics.PartWriteBack),
		SealKey: sealKey(s, d.sealName), Mirror: mr.manager, Cluster: remoteCluster(mr.manager),
	}
	if self, err := s.self.get(ctx); err == nil {
		wc.Self = self
	} else {
		log.Warn("the daemon's own user is not known, so it cannot leave itself out of the approvers it reads", "err", err)
	}
	wc.Approval = approval(ctx, s, d.approverPolicy)
	if d.shards != nil {
		wc.Owns = func(url, branch string) bool { return d.shards.Owns(shard.Key{URL: url, Branch: branch}) }
	}
	if attr != nil {
		wc.Approvers = func(uid types.UID, decision string) (authenticationv1.UserInfo, bool) {
			d, ok := attr.decisions.Who(uid, decision)
			return d.User, ok
		}
	}
	ctl, err := writeback.New(wc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(s.kube)
	if err != nil {
		return nil, err
	}
	s.optional.track(metrics.PartWriteBack, "edits pushed to Git are not turned into proposals, and approved proposals are not applied")
	if cfg.Halt {
		log.Warn("write-back is halted (--halt-write-back): proposals are opened, nothing is applied")
	}
	return &writeBack{ctl: ctl, dyn: dyn, optional: s.optional, log: log, namespace: s.namespace}, nil
}

// loadHolds keeps the mirror off the files of waiting proposals, once the Proposal kind is
// served (served closed); when it cannot, the mirror writes them from the live state and those
// proposals go Stale. Where no destination enables write-back there is nothing to hold, and it
// returns at once.
func (w *writeBack) loadHolds(ctx context.Context, served <-chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, loadHoldsTimeout)
	defer cancel()
	if on, err := w.ctl.Enabled(ctx); err == nil && !on {
		return
	}
	if !wait(ctx, served) {
		w.log.Warn("the Proposal kind was not served in time: files of waiting proposals are not held, and those proposals go Stale", "waited", loadHoldsTimeout)
		return
	}
	n, err := w.ctl.LoadHolds(ctx)
	if err != nil {
		w.optional.degraded(metrics.PartWriteBack, problem{
			what: "read the waiting proposals: " + err.Error(),
			fix:  "grant the daemon get/list/watch on proposals.configbutler.ai (deploy/rbac.yaml, the Helm chart)",
		})
		return
	}
	if n > 0 {
		w.log.Info("files of waiting proposals held", "count", n)
	}
}

// Run waits until the daemon may read its write-back kinds, then runs the controller.
func (w *writeBack) Run(ctx context.Context) error {
	probed := w.optional.retry(ctx, metrics.PartWriteBack, func() (problem, bool) {
		err := w.probe(ctx)
		p := problem{
			what: fmt.Sprint(err),
			fix: "grant the daemon get/list/watch/create on proposals and syncruns of configbutler.ai, and get/create on Secrets " +
				"of its namespace (deploy/rbac.yaml, the Helm chart)",
		}
		if isNamespaceNotFound(err) { // the key of the proposals' seals lives there
			p.what = fmt.Sprintf("the namespace %s does not exist, so the key of the proposals' seals cannot be kept there: %v", w.namespace, err)
			p.fix = fmt.Sprintf("create the namespace %s or set --%s", w.namespace, keyNamespace)
		}
		return p, err == nil
	})
	if !probed {
		return nil
	}
	w.optional.fine(metrics.PartWriteBack)
	return w.ctl.Run(ctx)
}

func (w *writeBack) probe(ctx context.Context) error {
	if err := mayList(ctx, w.dyn, crds.Proposals, crds.SyncRuns); err != nil {
		return err
	}
	return w.ctl.LoadKey(ctx)
}

// selections tells write-back what the watch selects for a destination.
func selections(m *watch.Manager) func(destination string) []writeback.Selection {
	return func(destination string) []writeback.Selection {
		var out []writeback.Selection
		for _, s := range m.Selections(destination) {
			writers := make([]writeback.Writer, len(s.Writers))
			for i, w := range s.Writers {
				writers[i] = writeback.Writer{Rule: w.Rule, ServiceAccount: w.ServiceAccount}
			}
			out = append(out, writeback.Selection{GVR: s.GVR, Kind: s.Kind, Namespaced: s.Namespaced, Namespace: s.Namespace,
				InNamespace: func(namespace string) bool { return m.SelectsNamespace(s, namespace) },
				Labels:      func(namespace string, labels map[string]string) bool { return m.SelectsObject(s, namespace, labels) },
				Writers:     writers})
		}
		return out
	}
}

// remoteCluster tells write-back the connection to the RemoteCluster a destination mirrors: only
// once the watch admitted the destination to it (spec.accessPolicy) and selects something of it
// for the destination, so another destination's admission lends it nothing, and only while it is
// connected.
func remoteCluster(m *watch.Manager) func(dest *crds.GitDestination) (*rest.Config, error) {
	return func(dest *crds.GitDestination) (*rest.Config, error) {
		ref := dest.Spec.ClusterRef
		if ref == nil {
			return nil, fmt.Errorf("GitDestination %s/%s names no RemoteCluster", dest.Namespace, dest.Name)
		}
		name, key := ref.NamespaceOr(dest.Namespace)+"/"+ref.Name, dest.Namespace+"/"+dest.Name
		if !slices.ContainsFunc(m.Selections(key), func(s watch.Selection) bool { return s.Cluster == name }) {
			return nil, fmt.Errorf("the mirror does not (yet) mirror RemoteCluster %s for GitDestination %s: their Ready conditions say why", name, key)
		}
		cfg, ok := m.ClusterConfig(name)
		if !ok {
			return nil, fmt.Errorf("RemoteCluster %s is not connected", name)
		}
		return cfg, nil
	}
}

// mayList checks that the daemon may list each resource, by listing one object of it: an
// optional part probes its permissions this way before it starts.
func mayList(ctx context.Context, dyn dynamic.Interface, gvrs ...schema.GroupVersionResource) error {
	for _, gvr := range gvrs {
		if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return err
		}
	}
	return nil
}

// creditChain credits a change to what write-back applied first, then to whoever the admission
// webhook saw.
type creditChain struct {
	credits *writeback.Credits
	attr    *attribution // nil: the webhook is disabled
}

func (c creditChain) Author(op string, gk schema.GroupKind, namespace, name string, content []byte) (gitops.Credit, bool) {
	if cr, ok := c.credits.Author(op, gk, namespace, name, content); ok {
		return cr, true
	}
	if c.attr == nil {
		return gitops.Credit{}, false
	}
	return c.attr.store.Author(op, gk, namespace, name, content)
}
