package webhook

import (
	"slices"
	"time"

	"github.com/configbutler/gitops-reverser/gitops"
)

// Correlation is one admission record as it travels from the replica that answered the admission
// to the Stores of its peers, whose watch may be the one that sees the change: the key the watch
// looks it up by, hash included (the receiving side has no object to hash), who made the change,
// and how long ago it was recorded. An age rather than a time, so the replicas' clocks need not
// agree.
type Correlation struct {
	Op, Group, Kind, Namespace, Name string
	Hash                             string // sanitize.Hash of the sanitized object; "" for DELETE
	Author                           gitops.Signature
	Groups                           []string
	Age                              time.Duration // since the record was made
	// Cluster is the RemoteCluster ("namespace/name") whose apiserver sent the review; "" for the
	// daemon's own cluster.
	Cluster string
}

func correlationOf(k key, author gitops.Signature, groups []string) Correlation {
	return Correlation{Op: k.op, Group: k.group, Kind: k.kind, Namespace: k.namespace, Name: k.name, Hash: k.hash,
		Author: author, Groups: groups}
}

// Import stores a record another replica made, under its key exactly as sent: the hash is never
// recomputed. It is bounded like a record made here: it counts against the same capacity, and it
// ages from c.Age, so it expires when the sender's own copy does. A record that names nobody, or
// that has already outlived the TTL, is dropped and Import returns false. Like Record, it replaces
// an earlier record of the same change.
func (s *Store) Import(c Correlation) bool {
	if c.Author.IsZero() || c.Age < 0 || c.Age >= s.ttl {
		return false
	}
	k := key{op: c.Op, group: c.Group, kind: c.Kind, namespace: c.Namespace, name: c.Name, hash: c.Hash}
	e := entry{author: c.Author, groups: slices.Clone(c.Groups), at: s.now().Add(-c.Age)}
	s.cache.Set(k, e, s.ttl-c.Age)
	s.last.Store(e.at.UnixNano())
	return true
}
