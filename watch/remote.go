package watch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configbutler/gitops-reverser/authz"
	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/kube"
)

// Defaults and timings of remote clusters.
const (
	DefaultRemoteQPS   = 20
	DefaultRemoteBurst = 40
	// clusterRecheck is how often a remote cluster's kubeconfig Secret is read again and its
	// apiserver asked whether it answers.
	clusterRecheck = 15 * time.Second
	// clusterProbeTimeout bounds one probe of a remote apiserver.
	clusterProbeTimeout = 10 * time.Second
)

// The Ready reasons of a RemoteCluster.
const (
	ReasonConnected          = "Connected"
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonKubeconfigInvalid  = "KubeconfigInvalid"
	ReasonExecNotAllowed     = "ExecNotAllowed"
	ReasonInsecureNotAllowed = "InsecureNotAllowed"
	ReasonUnreachable        = "Unreachable"
	ReasonUnauthorized       = "Unauthorized"
	ReasonForbidden          = "Forbidden"
)

// RemoteOptions are what the daemon allows of remote clusters' kubeconfigs.
type RemoteOptions struct {
	// AllowExec lets a kubeconfig run an exec credential plugin (or an auth provider) inside the
	// daemon's container.
	AllowExec bool
	// AllowInsecure lets a kubeconfig skip the verification of the apiserver's certificate.
	AllowInsecure bool
}

// connection is one kubeconfig of a remote cluster, connected: it never changes; a rotated
// Secret makes a new one.
type connection struct {
	fingerprint string // of the kubeconfig and the limits
	cfg         *rest.Config
	dyn         dynamic.Interface
	api         rest.Interface
}

// remoteState is what the last probe of a remote cluster found.
type remoteState struct {
	conn       *connection // nil until a kubeconfig could be used
	cond       condition
	server     string
	version    string
	resources  []kube.APIResource // from its last discovery that worked; kept through outages
	discovered time.Time
}

// remote is a RemoteCluster some destination uses. Its goroutine reads the kubeconfig Secret and
// probes the apiserver every clusterRecheck; the manager reads the latest state at each reconcile,
// so an unreachable cluster never holds a reconcile up.
type remote struct {
	name      string // namespace/name
	obj       atomic.Pointer[crds.RemoteCluster]
	mu        sync.Mutex
	state     remoteState
	lastEvent atomic.Int64 // unix nanoseconds of the last change a watch event delivered
	kick      Changes      // probe now: the RemoteCluster changed
	rights    rights
	// denied is what the rules select that the kubeconfig's identity may not read, as the last
	// reconcile found; touched only by the manager's goroutine.
	denied string
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *remote) snapshot() remoteState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// seen records that a watch of the cluster delivered a change.
func (r *remote) seen() { r.lastEvent.Store(time.Now().UnixNano()) }

// startRemote starts following a RemoteCluster; onChange is called when its state moved.
func (m *Manager) startRemote(ctx context.Context, obj *crds.RemoteCluster) *remote {
	ctx, cancel := context.WithCancel(ctx)
	r := &remote{name: obj.Namespace + "/" + obj.Name, kick: NewChanges(), cancel: cancel, done: make(chan struct{})}
	r.obj.Store(obj)
	r.state.cond = waitingFor("Connecting", "connecting")
	go func() {
		defer close(r.done)
		m.followRemote(ctx, r)
	}()
	return r
}

func (r *remote) stop() {
	r.cancel()
	<-r.done
}

// followRemote probes r until ctx ends: at once, then every clusterRecheck or when kicked.
func (m *Manager) followRemote(ctx context.Context, r *remote) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		before := r.snapshot()
		after := m.probeRemote(ctx, r.obj.Load(), before)
		r.mu.Lock()
		r.state = after
		r.mu.Unlock()
		if ctx.Err() == nil && (after.conn != before.conn || after.cond != before.cond || len(after.resources) != len(before.resources)) {
			m.poke()
		}
		t.Reset(clusterRecheck)
	}
}

// probeRemote reads the kubeconfig, connects anew when it (or the limits) changed, and asks the
// apiserver for its version, and for discovery when it was never read, the connection is new or
// the last was DiscoveryRefresh ago (it is kept through failures).
func (m *Manager) probeRemote(ctx context.Context, obj *crds.RemoteCluster, st remoteState) remoteState {
	data, cond := m.kubeconfigOf(ctx, obj)
	if data == nil {
		st.cond = cond
		return st
	}
	fp := fingerprint(data, obj.Spec.QPS, obj.Spec.Burst)
	if st.conn == nil || st.conn.fingerprint != fp {
		conn, server, cond := connect(data, fp, obj.Spec, m.opts.Remote)
		if conn == nil {
			st.conn, st.cond = nil, cond
			return st
		}
		st.conn, st.server, st.resources, st.version = conn, server, nil, ""
	}
	ctx, cancel := context.WithTimeout(ctx, clusterProbeTimeout)
	defer cancel()
	version, err := serverVersion(ctx, st.conn.api)
	if err != nil {
		st.cond = clusterFailure(st.server, err)
		return st
	}
	st.version = version
	if st.resources == nil || time.Since(st.discovered) >= m.opts.DiscoveryRefresh {
		resources, err := kube.Discover(ctx, st.conn.api, m.opts.Log.With("cluster", obj.Namespace+"/"+obj.Name))
		if err != nil {
			st.cond = clusterFailure(st.server, err)
			return st
		}
		st.resources, st.discovered = resources, time.Now()
	}
	st.cond = condition{ready: true, reason: ReasonConnected, message: fmt.Sprintf("connected to %s (Kubernetes %s), %d resources", st.server, version, len(st.resources))}
	return st
}

// kubeconfigOf reads the kubeconfig from the RemoteCluster's Secret: its key, else value, else value.yaml.
func (m *Manager) kubeconfigOf(ctx context.Context, obj *crds.RemoteCluster) ([]byte, condition) {
	ref := obj.Spec.KubeConfig.SecretRef
	s, err := kube.For(m.dyn, kube.Secrets, obj.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, notReady(ReasonSecretNotFound, "Secret %s/%s not found", obj.Namespace, ref.Name)
	}
	if err != nil {
		return nil, notReady(ReasonSecretNotFound, "read Secret %s/%s: %v", obj.Namespace, ref.Name, err)
	}
	keys := []string{crds.DefaultKubeConfigKey, crds.KubeConfigKeyYAML}
	if ref.Key != "" {
		keys = []string{ref.Key}
	}
	for _, k := range keys {
		if v := s.Data[k]; len(v) > 0 {
			return v, condition{}
		}
	}
	return nil, notReady(ReasonKubeconfigInvalid, "Secret %s/%s has no key %s", obj.Namespace, ref.Name, keys[0])
}

func fingerprint(data []byte, qps, burst int32) string {
	h := sha256.New()
	h.Write(data)
	_, _ = fmt.Fprintf(h, "\x00%d\x00%d", qps, burst) // a hash never fails to write
	return hex.EncodeToString(h.Sum(nil))
}

func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

// serverVersion asks the apiserver for its version: it answers, and accepts the credentials.
func serverVersion(ctx context.Context, api rest.Interface) (string, error) {
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	body, err := api.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("read /version: %w", err)
	}
	return v.GitVersion, nil
}

// clusterFailure is the condition of a cluster whose apiserver failed a request with err.
func clusterFailure(server string, err error) condition {
	var netErr net.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return notReady(ReasonUnauthorized, "%s refuses the kubeconfig's credentials (revoked or expired?): %v", server, err)
	case apierrors.IsForbidden(err):
		return notReady(ReasonForbidden, "%s forbids the kubeconfig's identity to read discovery: %v", server, err)
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
		return notReady(ReasonUnreachable, "%s does not answer; its files stay as they are and it is caught up once it answers: %v", server, err)
	}
	return notReady(ReasonUnreachable, "%s: %v", server, err)
}

// allowedNamespaces turns the selections of a destination of a remote cluster into those its
// RemoteCluster allows: a WatchRule's namespace only if named; every namespace as one selection
// per named one; cluster-scoped resources only with clusterScoped. refused names what was left out.
func allowedNamespaces(sels []Selection, spec crds.RemoteClusterSpec) (out []Selection, refused []string) {
	all := slices.Contains(spec.Namespaces, crds.AllNamespaces)
	for _, s := range sels {
		switch {
		case !s.Namespaced:
			if spec.ClusterScoped {
				out = append(out, s)
			} else {
				refused = append(refused, s.GVR.GroupResource().String()+" (cluster-scoped)")
			}
		case all:
			out = append(out, s)
		case s.Namespace != "":
			if slices.Contains(spec.Namespaces, s.Namespace) {
				out = append(out, s)
			} else {
				refused = append(refused, "namespace "+s.Namespace)
			}
		default:
			for _, ns := range spec.Namespaces {
				one := s
				one.Namespace = ns
				out = append(out, one)
			}
		}
	}
	slices.Sort(refused)
	return out, slices.Compact(refused)
}

// remoteStatus is the status the manager writes for a RemoteCluster beside its condition; the
// time of the last event in whole seconds, so it changes at most once a second.
func remoteStatus(st remoteState, watches int, lastEvent int64, attribution string) crds.RemoteClusterStatus {
	out := crds.RemoteClusterStatus{Server: st.server, Version: st.version, Resources: len(st.resources), Watches: watches, Attribution: attribution}
	if lastEvent != 0 {
		t := metav1.NewTime(time.Unix(0, lastEvent).UTC().Truncate(time.Second))
		out.LastEventTime = &t
	}
	return out
}

// sameRemoteStatus says whether have holds want's fields already (conditions aside).
func sameRemoteStatus(have, want crds.RemoteClusterStatus) bool {
	sameTime := (have.LastEventTime == nil) == (want.LastEventTime == nil) &&
		(have.LastEventTime == nil || have.LastEventTime.Equal(want.LastEventTime))
	return sameTime && have.Server == want.Server && have.Version == want.Version && have.Resources == want.Resources &&
		have.Watches == want.Watches && have.Attribution == want.Attribution
}

// rights are the answers of a remote cluster about what its kubeconfig's identity may read, kept
// for accessRecheck per connection.
type rights struct {
	mu      sync.Mutex
	conn    *connection
	reviews *authz.Cache
}

// maxRemoteAnswers bounds the answers kept per connection: two per selection.
const maxRemoteAnswers = 10000

// unreadable asks the remote cluster (SelfSubjectAccessReviews) whether the kubeconfig's identity
// may list and watch every selection, and says what it may not; "" when it may.
func (r *remote) unreadable(ctx context.Context, conn *connection, sels []Selection) string {
	r.rights.mu.Lock()
	defer r.rights.mu.Unlock()
	if r.rights.conn != conn {
		r.rights.conn = conn
		r.rights.reviews = authz.NewCache(conn.dyn, authz.Keep{Allowed: accessRecheck, Refused: accessRecheck, Max: maxRemoteAnswers})
	}
	ctx, cancel := context.WithTimeout(ctx, clusterProbeTimeout)
	defer cancel()
	var denied []string
	for _, sel := range sels {
		for _, verb := range []string{"list", "watch"} {
			// Fails open: the watchers list and watch as this very identity, so that cluster's
			// apiserver refuses them itself and their status says so; this review only words
			// the refusal before they start. Closed, a blip of the review API would stop
			// watchers that work.
			v := r.rights.reviews.Ask(ctx, authz.Question{Resource: &authorizationv1.ResourceAttributes{
				Namespace: sel.Namespace, Verb: verb, Group: sel.GVR.Group, Resource: sel.GVR.Resource,
			}}, authz.FailOpen)
			if !v.Allowed {
				where := "every namespace"
				if sel.Namespace != "" {
					where = "namespace " + sel.Namespace
				} else if !sel.Namespaced {
					where = "the cluster"
				}
				denied = append(denied, fmt.Sprintf("%s %s in %s", verb, sel.GVR.GroupResource(), where))
			}
		}
	}
	if len(denied) == 0 {
		return ""
	}
	return fmt.Sprintf("the kubeconfig's identity may not %s on RemoteCluster %s: grant it list and watch there", strings.Join(denied, ", "), r.name)
}
