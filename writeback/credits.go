package writeback

import (
	"crypto/sha256"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/gitops"
)

// creditTTL bounds how long an apply waits for the watch to see its result.
const creditTTL = 10 * time.Minute

// Credits tells the mirror who an apply of write-back was for: the commit that records an
// applied proposal is authored by the person who wrote the Git edit and names the proposal in
// its trailers, not the daemon's service account. An apply registers the exact content it will
// produce before it is sent; the watch event with that content is credited once.
type Credits struct {
	mu      sync.Mutex
	entries map[creditKey]creditEntry
	now     func() time.Time
}

type creditKey struct {
	cluster         string // the RemoteCluster ("namespace/name") of the object; "" for the daemon's own
	gk              schema.GroupKind
	namespace, name string
}

type creditEntry struct {
	deleted bool
	digest  [sha256.Size]byte
	credit  gitops.Credit
	expires time.Time
}

// NewCredits returns an empty store.
func NewCredits() *Credits {
	return &Credits{entries: map[creditKey]creditEntry{}, now: time.Now}
}

// Expect records that the next watch event of the object of cluster (a RemoteCluster, "" for the
// daemon's own) with this content (its canonical JSON, sanitize.JSON; nil for a delete) is
// credited to credit.
func (c *Credits) Expect(cluster string, gk schema.GroupKind, namespace, name string, content []byte, credit gitops.Credit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, e := range c.entries {
		if now.After(e.expires) {
			delete(c.entries, k)
		}
	}
	c.entries[creditKey{cluster, gk, namespace, name}] = creditEntry{
		deleted: content == nil, digest: sha256.Sum256(content), credit: credit, expires: now.Add(creditTTL),
	}
}

// Author implements watch.Authors for the changes write-back made in the daemon's own cluster;
// anything else is not found.
func (c *Credits) Author(op string, gk schema.GroupKind, namespace, name string, content []byte) (gitops.Credit, bool) {
	return c.AuthorIn("", op, gk, namespace, name, content)
}

// AuthorIn is Author for the objects of RemoteCluster cluster.
func (c *Credits) AuthorIn(cluster, op string, gk schema.GroupKind, namespace, name string, content []byte) (gitops.Credit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := creditKey{cluster, gk, namespace, name}
	e, ok := c.entries[k]
	if !ok || c.now().After(e.expires) {
		return gitops.Credit{}, false
	}
	if (op == "DELETE") != e.deleted || (!e.deleted && sha256.Sum256(content) != e.digest) {
		return gitops.Credit{}, false
	}
	delete(c.entries, k)
	return e.credit, true
}
