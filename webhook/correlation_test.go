package webhook

import (
	"testing"
	"time"
)

func TestImportIsCreditedLikeARecordMadeHere(t *testing.T) {
	content := []byte("data: 1\n")
	// What a peer's Record of the same change returns, as it arrives here.
	sent := func(t *testing.T, age time.Duration) Correlation {
		peer, _, _ := newTestStore(t, StoreConfig{})
		c, ok := peer.Record(Change{"UPDATE", configMap, "team-a", "app", content}, alice)
		if !ok {
			t.Fatal("the peer recorded nothing")
		}
		c.Age = age
		return c
	}
	cases := []struct {
		name     string
		age      time.Duration
		wait     time.Duration // on this store's clock, between Import and Author
		imported bool
		hit      bool
	}{
		{"a fresh record is a hit", 0, 0, true, true},
		{"a record ages from the sender's age", 10 * time.Second, DefaultTTL - 11*time.Second, true, true},
		{"and expires when the sender's copy does", 10 * time.Second, DefaultTTL - 9*time.Second, true, false},
		{"a record older than the TTL is dropped", DefaultTTL, 0, false, false},
		{"a negative age is dropped", -time.Second, 0, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, clock := newTestStore(t, StoreConfig{})
			if got := s.Import(sent(t, tc.age)); got != tc.imported {
				t.Fatalf("Import = %v; want %v", got, tc.imported)
			}
			clock.Advance(tc.wait)
			got, ok := s.Author("UPDATE", configMap, "team-a", "app", content)
			if ok != tc.hit || (ok && got.Author != aliceSig) {
				t.Errorf("Author = %+v, %v; want a hit: %v", got, ok, tc.hit)
			}
		})
	}
	t.Run("nobody to credit is dropped", func(t *testing.T) {
		s, _, _ := newTestStore(t, StoreConfig{})
		c := sent(t, 0)
		c.Author.Name, c.Author.Email = "", ""
		if s.Import(c) {
			t.Error("Import of a record naming nobody = true")
		}
	})
}

func TestImportSharesTheCapacity(t *testing.T) {
	s, _, _ := newTestStore(t, StoreConfig{Capacity: 2})
	s.Record(Change{"UPDATE", configMap, "team-a", "local", []byte("a")}, alice)
	for _, name := range []string{"peer-1", "peer-2"} {
		if !s.Import(Correlation{Op: "UPDATE", Kind: "ConfigMap", Namespace: "team-a", Name: name, Hash: "h", Author: aliceSig}) {
			t.Fatalf("Import %s = false", name)
		}
	}
	if s.Len() != 2 {
		t.Errorf("Len = %d; want the capacity, 2", s.Len())
	}
	if _, ok := s.Author("UPDATE", configMap, "team-a", "local", []byte("a")); ok {
		t.Error("the oldest record outlived the capacity")
	}
}
