package writeback

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/gitops"
)

func TestCreditsMatchTheAppliedContentOnce(t *testing.T) {
	c := NewCredits()
	gk := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	credit := gitops.Credit{Author: gitops.Signature{Name: "Alice"}, Trailers: [][2]string{{TrailerProposal, "ns/p"}}}
	c.Expect("", gk, "ns", "web", []byte("replicas: 3\n"), credit)

	if _, ok := c.Author("UPDATE", gk, "ns", "web", []byte("replicas: 2\n")); ok {
		t.Error("other content was credited to the apply")
	}
	if _, ok := c.Author("DELETE", gk, "ns", "web", nil); ok {
		t.Error("a delete was credited to an apply")
	}
	got, ok := c.Author("UPDATE", gk, "ns", "web", []byte("replicas: 3\n"))
	if !ok || got.Author.Name != "Alice" || got.Trailers[0][1] != "ns/p" {
		t.Fatalf("Author = %+v, %v", got, ok)
	}
	if _, ok := c.Author("UPDATE", gk, "ns", "web", []byte("replicas: 3\n")); ok {
		t.Error("a credit was used twice")
	}
}

func TestCreditsOfDeletesAndExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewCredits()
	c.now = func() time.Time { return now }
	gk := schema.GroupKind{Kind: "ConfigMap"}
	c.Expect("", gk, "ns", "gone", nil, gitops.Credit{Author: gitops.Signature{Name: "Alice"}})
	c.Expect("", gk, "ns", "late", []byte("x"), gitops.Credit{Author: gitops.Signature{Name: "Bob"}})
	if got, ok := c.Author("DELETE", gk, "ns", "gone", nil); !ok || got.Author.Name != "Alice" {
		t.Errorf("delete credit = %+v, %v", got, ok)
	}
	now = now.Add(creditTTL + time.Second)
	if _, ok := c.Author("UPDATE", gk, "ns", "late", []byte("x")); ok {
		t.Error("an expired credit was used")
	}
}

func TestProposalNameIsStablePerEdit(t *testing.T) {
	a := proposalName("dest", "live/ns/configmaps/a.yaml", "c1", []byte("x"))
	if a != proposalName("dest", "live/ns/configmaps/a.yaml", "c1", []byte("x")) {
		t.Error("the same edit got two names")
	}
	for _, other := range []string{
		proposalName("dest", "live/ns/configmaps/b.yaml", "c1", []byte("x")),
		proposalName("dest", "live/ns/configmaps/a.yaml", "c2", []byte("x")),
		proposalName("dest", "live/ns/configmaps/a.yaml", "c1", []byte("y")),
	} {
		if other == a {
			t.Errorf("different edits share the name %s", a)
		}
	}
	long := proposalName(string(make([]byte, 300)), "p", "c", nil)
	if len(long) > 253 {
		t.Errorf("name of %d bytes", len(long))
	}
}
