package crds_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configbutler/gitops-reverser/crds"
)

func TestToUnstructuredFillsTypeMetaOfOurKinds(t *testing.T) {
	dest := crds.GitDestination{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"},
		Spec:       crds.GitDestinationSpec{RepoRef: crds.NamespacedReference{Name: "r"}, Branch: "main", BaseFolder: "x"},
	}
	explicit := dest
	explicit.TypeMeta = metav1.TypeMeta{APIVersion: "configbutler.ai/v9", Kind: "Other"}
	cases := []struct {
		name             string
		obj              any
		apiVersion, kind string
	}{
		{"pointer", &dest, "configbutler.ai/v1alpha1", crds.KindGitDestination},
		{"value", dest, "configbutler.ai/v1alpha1", crds.KindGitDestination},
		{"explicit TypeMeta kept", &explicit, "configbutler.ai/v9", "Other"},
		{"cluster kind", &crds.ClusterWatchRule{}, "configbutler.ai/v1alpha1", crds.KindClusterWatchRule},
		{"receiver", crds.Receiver{}, "configbutler.ai/v1alpha1", crds.KindReceiver},
		{"foreign type left alone", &metav1.ObjectMeta{Name: "x"}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := crds.ToUnstructured(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if u.GetAPIVersion() != tc.apiVersion || u.GetKind() != tc.kind {
				t.Errorf("got %s %s, want %s %s", u.GetAPIVersion(), u.GetKind(), tc.apiVersion, tc.kind)
			}
		})
	}
}

func TestUnstructuredRoundTripKeepsEveryField(t *testing.T) {
	for _, f := range fullFixtures("ns") {
		t.Run(f.kind, func(t *testing.T) {
			u, err := crds.ToUnstructured(f.obj)
			if err != nil {
				t.Fatal(err)
			}
			back, err := f.decode(u)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(field(f.obj, "Spec"), field(back, "Spec")); diff != "" {
				t.Errorf("spec changed (-before +after):\n%s", diff)
			}
			if _, found := u.Object["status"]; found {
				t.Errorf("an empty status is sent: %v", u.Object["status"])
			}
		})
	}
}

func TestConversionErrorsAreReported(t *testing.T) {
	if _, err := crds.ToUnstructured(nil); err == nil {
		t.Error("ToUnstructured(nil) succeeded")
	}
	if _, err := crds.FromUnstructured[crds.WatchRule](nil); err == nil {
		t.Error("FromUnstructured(nil) succeeded")
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"rules": "not a list"}}}
	if _, err := crds.FromUnstructured[crds.WatchRule](bad); err == nil {
		t.Error("FromUnstructured with a string for a list succeeded")
	}
}

func TestNamespaceOrDefaultsToTheReferrer(t *testing.T) {
	if got := (crds.NamespacedReference{Name: "d"}).NamespaceOr("team-a"); got != "team-a" {
		t.Errorf("empty namespace resolved to %q, want team-a", got)
	}
	if got := (crds.NamespacedReference{Name: "d", Namespace: "infra"}).NamespaceOr("team-a"); got != "infra" {
		t.Errorf("explicit namespace resolved to %q, want infra", got)
	}
}

func TestReceiverResourceNamespaceDefaultsToTheReceiver(t *testing.T) {
	if got := (crds.ReceiverResource{Kind: crds.KindGitDestination, Name: "d"}).NamespaceOr("team-a"); got != "team-a" {
		t.Errorf("empty namespace: got %q, want team-a", got)
	}
	if got := (crds.ReceiverResource{Kind: crds.KindGitRepoConfig, Name: "r", Namespace: "infra"}).NamespaceOr("team-a"); got != "infra" {
		t.Errorf("explicit namespace: got %q, want infra", got)
	}
}
