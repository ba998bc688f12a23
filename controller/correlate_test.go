package controller

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCorrelatorCountsRepeatsAndThrottlesFloods: a repeat is counted on the Event written before
// (patched, not created), and an object's Events beyond the burst are skipped.
func TestCorrelatorCountsRepeatsAndThrottlesFloods(t *testing.T) {
	c := newCorrelator()
	event := func(obj, message string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: obj + "." + message, Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{Kind: "Proposal", Namespace: "ns", Name: obj},
			Type:           corev1.EventTypeWarning, Reason: "Refused", Message: message, Count: 1, LastTimestamp: metav1.Now()}
	}
	first := event("a", "m")
	out, repeat, skip := c.correlate(first)
	if out != first || repeat || skip {
		t.Fatalf("first: out=%v repeat=%v skip=%v", out.Name, repeat, skip)
	}
	c.remember(first)
	out, repeat, skip = c.correlate(event("a", "m"))
	if !repeat || skip || out.Name != first.Name || out.Count != 2 {
		t.Fatalf("repeat: %s count %d repeat=%v skip=%v", out.Name, out.Count, repeat, skip)
	}
	for i := 2; i < floodBurst; i++ {
		if _, _, skip := c.correlate(event("a", fmt.Sprint(i))); skip {
			t.Fatalf("event %d of one object skipped within the burst of %d", i+1, floodBurst)
		}
	}
	if _, _, skip := c.correlate(event("a", "one too many")); !skip {
		t.Fatal("an object beyond the burst: want its Event skipped")
	}
	if _, _, skip := c.correlate(event("b", "m")); skip {
		t.Fatal("another object's Event skipped")
	}
}
