package watch

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
)

// filter is what a destination's rules leave out of a resource: changes made only by excluded
// users or field managers, unless kept, the objects the cluster generates itself, and the objects
// outside their label selectors.
type filter struct {
	excludeUsers, excludeFieldManagers []string
	keepGenerated                      bool
	scopes                             labelScopes // nil selects every object
}

func filterOf(r crds.ResourceRule, scope labelScope) filter {
	f := filter{excludeUsers: r.ExcludeUsers, excludeFieldManagers: r.ExcludeFieldManagers, keepGenerated: r.KeepGenerated}
	if !scope.all() {
		f.scopes = labelScopes{scope}
	}
	return f
}

// and combines the filters of two rules that select the same resource for a destination: each
// rule asks for what it selects, so only what both leave out is left out.
func (f filter) and(g filter) filter {
	both := func(a, b []string) []string {
		var out []string
		for _, s := range a {
			if slices.Contains(b, s) {
				out = append(out, s)
			}
		}
		return out
	}
	return filter{
		excludeUsers:         both(f.excludeUsers, g.excludeUsers),
		excludeFieldManagers: both(f.excludeFieldManagers, g.excludeFieldManagers),
		keepGenerated:        f.keepGenerated || g.keepGenerated,
		scopes:               f.scopes.union(g.scopes),
	}
}

// String identifies the filter in a watcher's signature, so a changed rule restarts its watcher.
func (f filter) String() string {
	return fmt.Sprintf("%s|%s|%t|%s", strings.Join(f.excludeUsers, ","), strings.Join(f.excludeFieldManagers, ","), f.keepGenerated, f.scopes)
}

// excludes tells why a change made by user (the webhook's credit, "" when unknown) and the
// field managers of the object's newest entries is left out, "" when it is not.
func (f filter) excludes(user string, managers []string) string {
	if user != "" && matchesAny(f.excludeUsers, user) {
		return crds.SkipReasonExcludedUser
	}
	if len(managers) == 0 || len(f.excludeFieldManagers) == 0 {
		return ""
	}
	for _, m := range managers {
		if !matchesAny(f.excludeFieldManagers, m) {
			return ""
		}
	}
	return crds.SkipReasonExcludedFieldManager
}

// matchesAny matches value against names, where a trailing * matches any suffix.
func matchesAny(patterns []string, value string) bool {
	for _, p := range patterns {
		if prefix, wild := strings.CutSuffix(p, "*"); wild && strings.HasPrefix(value, prefix) || p == value {
			return true
		}
	}
	return false
}

// newestManagers returns the field managers of the newest managedFields entries of the object
// itself (status updates never change what the mirror writes): the managers of the change the
// watch just saw. Entries are stamped to the second, so two managers writing in the same second
// are both returned, and a change is then left out only if both are excluded. It reads the entries
// where they are, without GetManagedFields' reflection (a busy mirror asks this of every change),
// and like it returns none when an entry's manager, subresource or time is malformed.
func newestManagers(obj *unstructured.Unstructured) []string {
	meta, _ := obj.Object["metadata"].(map[string]any)
	entries, _ := meta["managedFields"].([]any)
	var newest time.Time
	var out []string
	for _, v := range entries {
		e, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		manager, mok := stringField(e, "manager")
		subresource, sok := stringField(e, "subresource")
		if !mok || !sok {
			return nil
		}
		if e["time"] == nil || subresource != "" {
			continue
		}
		stamp, _ := e["time"].(string)
		at, err := time.Parse(time.RFC3339, stamp)
		if err != nil {
			return nil
		}
		switch {
		case at.After(newest):
			newest, out = at, []string{manager}
		case at.Equal(newest) && !slices.Contains(out, manager):
			out = append(out, manager)
		}
	}
	return out
}

// stringField is e's member name as a string, "" when absent or null; false when it is another type.
func stringField(e map[string]any, name string) (string, bool) {
	switch v := e[name].(type) {
	case nil:
		return "", true
	case string:
		return v, true
	}
	return "", false
}

// annotationAutoUpdate marks the RBAC objects the apiserver creates and repairs at every start.
const annotationAutoUpdate = "rbac.authorization.kubernetes.io/autoupdate"

// generated tells why the cluster generated obj itself, "" when a person or a tool declared it.
func generated(sel Selection, obj *unstructured.Unstructured) string {
	core := sel.GVR.Group == ""
	switch {
	case core && sel.GVR.Resource == "configmaps" && obj.GetName() == "kube-root-ca.crt":
		return crds.SkipReasonKubeRootCA
	case core && sel.GVR.Resource == "serviceaccounts" && obj.GetName() == "default":
		return crds.SkipReasonDefaultServiceAccount
	case metav1.GetControllerOfNoCopy(obj) != nil:
		return crds.SkipReasonControllerOwned
	case sel.GVR.Group == "rbac.authorization.k8s.io" && obj.GetAnnotations()[annotationAutoUpdate] == "true":
		return crds.SkipReasonAutoUpdatedRBAC
	case managedBy(obj) == crds.ManagedByDaemon:
		// The keys of the daemon's Secrets (the digest of encrypted files, the seal of proposals)
		// and its policies: a daemon in a restored cluster makes its own, and the keys are worth
		// nothing in a repository, encrypted or not.
		return crds.SkipReasonDaemonsOwn
	}
	return ""
}

// managedBy is obj's label crds.LabelManagedBy, read in place: generated runs on every event,
// and GetLabels would copy every label for it.
func managedBy(obj *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(obj.Object, "metadata", "labels", crds.LabelManagedBy)
	return v
}

// skipCounts counts what one watcher left out for each of its targets: the generated objects it
// leaves out now, and the changes it left out since it started.
type skipCounts struct {
	mu        sync.Mutex
	generated []map[string]string // per target: namespace/name → reason
	changes   []map[string]int64  // per target: reason → changes left out
}

func newSkipCounts(targets int) *skipCounts {
	c := &skipCounts{generated: make([]map[string]string, targets), changes: make([]map[string]int64, targets)}
	for i := range targets {
		c.generated[i], c.changes[i] = map[string]string{}, map[string]int64{}
	}
	return c
}

// setGenerated records whether the object key is left out of target i as generated (reason "": not).
func (c *skipCounts) setGenerated(i int, key, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason == "" {
		delete(c.generated[i], key)
	} else {
		c.generated[i][key] = reason
	}
}

// resetGenerated forgets the generated objects of every target, before a list counts them again.
func (c *skipCounts) resetGenerated() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.generated {
		c.generated[i] = map[string]string{}
	}
}

func (c *skipCounts) changeSkipped(i int, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes[i][reason]++
}

// addTo adds target i's counts to by (reason → count).
func (c *skipCounts) addTo(i int, by map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, reason := range c.generated[i] {
		by[reason]++
	}
	for reason, n := range c.changes[i] {
		by[reason] += n
	}
}

// skippedByDestination sums what the running watchers leave out, by destination and reason, in
// the order of crds.SkipReasons.
func (m *Manager) skippedByDestination() map[string][]crds.SkipCount {
	by := map[string]map[string]int64{}
	for _, r := range m.watchers {
		for i, t := range r.w.targets {
			if by[t.destination] == nil {
				by[t.destination] = map[string]int64{}
			}
			r.w.skipped.addTo(i, by[t.destination])
		}
	}
	out := map[string][]crds.SkipCount{}
	for dest, counts := range by {
		for _, reason := range crds.SkipReasons {
			if n := counts[reason]; n > 0 {
				out[dest] = append(out[dest], crds.SkipCount{Reason: reason, Count: n})
			}
		}
	}
	return out
}
