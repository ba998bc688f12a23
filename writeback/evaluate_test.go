package writeback

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// TestSelectionScope: a WatchRule's selection covers its own namespace only, a ClusterWatchRule's
// every namespace (or those its namespaceSelector selects), and a cluster-scoped resource only
// objects without a namespace.
func TestSelectionScope(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	sels := []Selection{
		{GVR: cms, Kind: "ConfigMap", Namespaced: true, Namespace: "team-a"},
		{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespaced: true},
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Kind: "Namespace"},
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "services"}, Kind: "Service", Namespaced: true,
			InNamespace: func(ns string) bool { return ns == "labelled" }},
	}
	cases := []struct {
		group, kind, namespace string
		selected               bool
	}{
		{"", "ConfigMap", "team-a", true},
		{"", "ConfigMap", "team-b", false},
		{"", "ConfigMap", "", false},
		{"apps", "Deployment", "anywhere", true},
		{"", "Deployment", "anywhere", false},
		{"", "Namespace", "", true},
		{"", "Namespace", "team-a", false},
		{"", "Secret", "team-a", false},
		{"", "Service", "labelled", true},
		{"", "Service", "team-a", false},
	}
	for _, tc := range cases {
		if got := selectKind(sels, tc.group, tc.kind, tc.namespace) != nil; got != tc.selected {
			t.Errorf("%s/%s in %q: selected %v, want %v", tc.group, tc.kind, tc.namespace, got, tc.selected)
		}
	}
	if r := resourceOf(sels, "", "ConfigMap"); r != "configmaps" {
		t.Errorf("resourceOf ConfigMap = %q", r)
	}
}

// TestStaleness: a proposal is stale once the live object no longer has the content it was
// computed against; a change the mirror does not write (status) does not count.
func TestStaleness(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg", "namespace": "a", "resourceVersion": "7"},
		"data":     map[string]any{"k": "v"},
	}}
	content, err := sanitize.YAML(sanitize.Object(live.Object))
	if err != nil {
		t.Fatal(err)
	}
	update := &crds.Proposal{Spec: crds.ProposalSpec{Change: crds.ChangeUpdate, LiveDigest: digest(content)}}
	if why := staleness(update, live); why != "" {
		t.Errorf("unchanged object is stale: %s", why)
	}
	moved := live.DeepCopy()
	moved.SetResourceVersion("8")
	moved.Object["status"] = map[string]any{"x": "y"}
	if why := staleness(update, moved); why != "" {
		t.Errorf("a new resourceVersion without new content is stale: %s", why)
	}
	moved.Object["data"] = map[string]any{"k": "w"}
	if staleness(update, moved) == "" {
		t.Error("changed content is not stale")
	}
	if staleness(update, nil) == "" {
		t.Error("a deleted object is not stale for an update")
	}
	create := &crds.Proposal{Spec: crds.ProposalSpec{Change: crds.ChangeCreate}}
	if staleness(create, nil) != "" || staleness(create, live) == "" {
		t.Error("create: stale exactly when the object exists")
	}
	for change, verb := range map[crds.ProposalChange]string{crds.ChangeCreate: "create", crds.ChangeUpdate: "patch", crds.ChangeDestroy: "delete"} {
		if got := verbOf(change); got != verb {
			t.Errorf("verbOf(%s) = %s, want %s", change, got, verb)
		}
	}
}

// TestLinksAreRefused: a symbolic link or a submodule is refused before anything is read.
func TestLinksAreRefused(t *testing.T) {
	_, err := (&Controller{}).evaluate(context.Background(), nil, nil, nil, gitedits.Edit{Path: "live/x/configmaps/l.yaml", Link: true})
	var refused *Refused
	if !errors.As(err, &refused) || refused.Reason != ReasonNotAFile {
		t.Fatalf("evaluate of a link: %v, want a %s refusal", err, ReasonNotAFile)
	}
}
