package authz

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/dynamic"
)

// Keep says how long a Cache uses an answer of the apiserver before it asks again: a role granted
// or taken away counts within it. A refusal may be kept shorter, so that a binding just made
// shows soon.
type Keep struct {
	Allowed, Refused time.Duration
	Max              int              // answers kept at most; 0: no bound
	Now              func() time.Time // nil: time.Now
}

// Cache asks the apiserver of one client, as Ask does, and uses an answer again while Keep says
// it is fresh. A question the apiserver did not answer is never kept: the next call asks again,
// and meanwhile the Failure rule of each call decides, never an older answer. Safe from any
// goroutine.
type Cache struct {
	dyn  dynamic.Interface
	keep Keep

	mu      sync.Mutex
	answers map[string]answer
}

type answer struct {
	verdict Verdict
	until   time.Time
}

// NewCache is a cache of the answers of dyn's apiserver.
func NewCache(dyn dynamic.Interface, keep Keep) *Cache {
	if keep.Now == nil {
		keep.Now = time.Now
	}
	return &Cache{dyn: dyn, keep: keep, answers: map[string]answer{}}
}

// Ask answers q from memory while it is fresh, else asks the apiserver; unanswered, rule decides.
func (c *Cache) Ask(ctx context.Context, q Question, rule Failure) Verdict {
	key := q.key()
	c.mu.Lock()
	last, ok := c.answers[key]
	c.mu.Unlock()
	if ok && c.keep.Now().Before(last.until) {
		return last.verdict
	}
	v := Ask(ctx, c.dyn, q, rule)
	if v.Err != nil {
		return v
	}
	ttl := c.keep.Allowed
	if !v.Allowed {
		ttl = c.keep.Refused
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep.Max > 0 && len(c.answers) >= c.keep.Max {
		c.pruneLocked()
		if len(c.answers) >= c.keep.Max {
			clear(c.answers) // asked again as needed: cheaper than keeping an order
		}
	}
	c.answers[key] = answer{verdict: v, until: c.keep.Now().Add(ttl)}
	return v
}

// Prune forgets the answers that are no longer fresh.
func (c *Cache) Prune() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneLocked()
}

func (c *Cache) pruneLocked() {
	now := c.keep.Now()
	for k, a := range c.answers {
		if !now.Before(a.until) {
			delete(c.answers, k)
		}
	}
}

// Len is the number of answers kept, fresh or not (Prune drops the others).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.answers)
}

// key names everything that can change the answer: who (groups in any order are the same
// groups), and what.
func (q Question) key() string {
	var user *authenticationv1.UserInfo
	if q.User != nil {
		u := *q.User
		u.Groups = slices.Sorted(slices.Values(u.Groups))
		user = &u
	}
	b, _ := json.Marshal(struct { // maps marshal with sorted keys
		User        *authenticationv1.UserInfo
		Resource    *authorizationv1.ResourceAttributes
		NonResource *authorizationv1.NonResourceAttributes
	}{user, q.Resource, q.NonResource})
	return string(b)
}
