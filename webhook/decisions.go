package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jellydator/ttlcache/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/metrics"
)

// ProposalsResource is the resource whose decisions the webhook records. The handler matches its
// group and resource in any version; registering this version is enough, as the registration's
// matchPolicy Equivalent has the apiserver convert requests made through other versions.
var ProposalsResource = crds.Proposals

// proposalsRegistration is what WithProposals adds: every namespace, the operations that can set
// a decision.
var proposalsRegistration = Resource{GVR: ProposalsResource, Namespaced: true, Operations: []string{"CREATE", "UPDATE"}}

// WithProposals returns rs plus the proposals resource, for Watched.Set and Registrar.SetResources
// of a daemon that records decisions. rs itself is not changed.
func WithProposals(rs []Resource) []Resource {
	return append(slices.Clip(rs), proposalsRegistration)
}

// isProposals reports whether gvr is ProposalsResource in any version.
func isProposals(gvr schema.GroupVersionResource) bool {
	return gvr.Group == ProposalsResource.Group && gvr.Resource == ProposalsResource.Resource
}

// Defaults of NewDecisions.
const (
	DefaultDecisionsCapacity = 10000
	DefaultDecisionsTTL      = 24 * time.Hour
)

// Decision is who set a proposal's spec.decision, as the apiserver authenticated them.
type Decision struct {
	Decision string                    // Approve | Reject | Ignore | "" (cleared)
	User     authenticationv1.UserInfo // exactly the admission request's userInfo
	At       time.Time                 // when the webhook saw the change, by the Decisions' clock
}

// Decisions remembers, per proposal UID, the last change of spec.decision and who made it, as the
// admission webhook saw it. A change of other fields leaves the record alone. It holds at most
// capacity proposals, dropping the one changed (or looked up by Who) longest ago to make room, and
// forgets a record older than the TTL. It needs no goroutine: expired records go when the next
// call looks.
//
// A record says who asked for the change, not that it persisted: a validating webhook is called
// before the write, which can still fail, and with failurePolicy Ignore a change made while the
// webhook was unreachable leaves no record. Who therefore matches the decision value, and callers
// treat a miss as "unknown setter". A record is only as trustworthy as the review it came from:
// whoever can reach the webhook's port can post a review naming any user, unless the server
// requires the apiserver's client certificate (httpserver.Config.ClientCA) or the network admits only
// the apiserver. Safe for concurrent use; nil records nothing and knows nothing.
type Decisions struct {
	ttl time.Duration
	now func() time.Time

	// mu makes Who's look-up and drop of an expired record one step with Record's replacement.
	mu sync.Mutex
	// byUID is given no TTL of its own: ttlcache ages items by the wall clock, and a record's age
	// here is its Decision.At by now (which tests move by hand). It brings the bound and the order.
	byUID *ttlcache.Cache[types.UID, Decision]
}

// NewDecisions returns an empty Decisions holding at most capacity proposals (<= 0: the default,
// 10,000) for at most ttl each (<= 0: the default, 24h), aged by now (nil: time.Now).
func NewDecisions(capacity int, ttl time.Duration, now func() time.Time) *Decisions {
	if capacity <= 0 {
		capacity = DefaultDecisionsCapacity
	}
	if ttl <= 0 {
		ttl = DefaultDecisionsTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Decisions{ttl: ttl, now: now,
		byUID: ttlcache.New(ttlcache.WithCapacity[types.UID, Decision](uint64(capacity)))}
}

// Record notes that user set the decision of proposal uid to decision, at the Decisions' clock's
// now, replacing what was recorded for uid. An empty uid is not recorded.
func (d *Decisions) Record(uid types.UID, decision string, user authenticationv1.UserInfo) {
	if d == nil || uid == "" {
		return
	}
	rec := Decision{Decision: decision, User: cloneUser(user), At: d.now()}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(rec.At)
	d.byUID.Set(uid, rec, ttlcache.DefaultTTL)
}

// Who returns who set proposal uid's decision to decision, if that is the last decision change
// recorded for uid and the record has not expired. A later change to another value hides the
// setter of an earlier one: after alice approves and bob rejects, Who(uid, "Approve") is false.
func (d *Decisions) Who(uid types.UID, decision string) (Decision, bool) {
	if d == nil {
		return Decision{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.expire(now)
	it := d.byUID.Get(uid)
	if it == nil {
		return Decision{}, false
	}
	rec := it.Value()
	if d.expired(rec, now) {
		d.byUID.Delete(uid)
		return Decision{}, false
	}
	if rec.Decision != decision {
		return Decision{}, false
	}
	rec.User = cloneUser(rec.User)
	return rec, true
}

// Forget drops what is recorded for proposal uid, e.g. once the proposal has been acted on.
func (d *Decisions) Forget(uid types.UID) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.byUID.Delete(uid)
}

// Len is the number of proposals with a record, expired ones not yet dropped included.
func (d *Decisions) Len() int {
	if d == nil {
		return 0
	}
	return d.byUID.Len()
}

// expire drops the expired records at the least recently used end, stopping at the first one
// still fresh. One that Who moved up (or recorded under a clock that went backwards) may sit
// before a younger one; Who checks each record it returns anyway.
func (d *Decisions) expire(now time.Time) {
	var old []types.UID
	d.byUID.RangeBackwards(func(it *ttlcache.Item[types.UID, Decision]) bool {
		if !d.expired(it.Value(), now) {
			return false
		}
		old = append(old, it.Key())
		return true
	})
	for _, uid := range old {
		d.byUID.Delete(uid)
	}
}

func (d *Decisions) expired(rec Decision, now time.Time) bool { return now.Sub(rec.At) > d.ttl }

// cloneUser copies user's slices and map, so neither the recorder nor a caller of Who can change
// a record through them.
func cloneUser(user authenticationv1.UserInfo) authenticationv1.UserInfo {
	user.Groups = slices.Clone(user.Groups)
	if user.Extra != nil {
		extra := make(map[string]authenticationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = slices.Clone(v)
		}
		user.Extra = extra
	}
	return user
}

// errNoUID is why a proposal review whose object has no metadata.uid is not recorded: the
// apiserver sets it before validating admission, so its absence means the review is not the
// apiserver's.
var errNoUID = errors.New("proposal has no metadata.uid")

// recordDecision records who changed a proposal's spec.decision: on CREATE when the decision is
// set, on UPDATE when it differs from the old object's. Only metadata.uid and spec.decision are
// decoded, of the object and, for UPDATE, of the old object, which the envelope decode skipped and
// which is read here from body, the whole review. It returns the review's result.
func (h *admissionHandler) recordDecision(req *admissionRequest, body []byte) (string, error) {
	if req.Operation != "CREATE" && req.Operation != "UPDATE" {
		return metrics.ReviewIgnored, nil
	}
	uid, decision, err := proposalDecision(req.Object)
	if err != nil {
		return metrics.ReviewError, fmt.Errorf("decode proposal: %w", err)
	}
	if uid == "" {
		return metrics.ReviewError, errNoUID
	}
	previous := ""
	if req.Operation == "UPDATE" {
		var review struct {
			Request struct {
				OldObject json.RawMessage `json:"oldObject"`
			} `json:"request"`
		}
		if err := json.Unmarshal(body, &review); err != nil {
			return metrics.ReviewError, fmt.Errorf("decode old proposal: %w", err)
		}
		oldUID, oldDecision, err := proposalDecision(review.Request.OldObject)
		if err != nil {
			return metrics.ReviewError, fmt.Errorf("decode old proposal: %w", err)
		}
		if oldUID != uid {
			return metrics.ReviewError, fmt.Errorf("proposal uid %q was %q in the old object", uid, oldUID)
		}
		previous = oldDecision
	}
	if decision == previous {
		return metrics.ReviewIgnored, nil // CREATE without a decision, or other fields changed
	}
	h.decisions.Record(uid, decision, req.UserInfo)
	h.log.Info("proposal decision recorded", "namespace", req.Namespace, "name", req.Name, "uid", uid,
		"decision", decision, "previous", previous, "user", req.UserInfo.Username)
	return metrics.ReviewRecorded, nil
}

// proposalDecision reads metadata.uid and spec.decision of a proposal in JSON. Keys match
// exactly, unlike encoding/json's struct fields: with preserved unknown fields a proposal may hold
// a "Decision" beside its "decision", and only the latter is the decision. A missing or null
// decision is "".
func proposalDecision(obj json.RawMessage) (types.UID, string, error) {
	root, err := members(obj)
	if err != nil {
		return "", "", err
	}
	if root == nil {
		return "", "", errors.New("no object")
	}
	meta, err := members(root["metadata"])
	if err != nil {
		return "", "", fmt.Errorf("metadata: %w", err)
	}
	spec, err := members(root["spec"])
	if err != nil {
		return "", "", fmt.Errorf("spec: %w", err)
	}
	var uid, decision string
	if err := stringMember(meta, "uid", &uid); err != nil {
		return "", "", fmt.Errorf("metadata: %w", err)
	}
	if err := stringMember(spec, "decision", &decision); err != nil {
		return "", "", fmt.Errorf("spec: %w", err)
	}
	return types.UID(uid), decision, nil
}

// members splits a JSON object into its members, their values left raw; absent or null is nil.
func members(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	return m, nil
}

// stringMember decodes member name of m into s, leaving s alone when it is absent or null.
func stringMember(m map[string]json.RawMessage, name string, s *string) error {
	raw, ok := m[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
