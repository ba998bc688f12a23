package crds_test

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
)

// strict makes the apiserver reject unknown fields instead of pruning them silently.
const strict = metav1.FieldValidationStrict

// equalTimes compares metav1.Time by instant: decoding yields local time, we send UTC.
var equalTimes = cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })

func TestRoundTripEveryKind(t *testing.T) {
	dyn := mustInstall(t)
	const ns = "roundtrip"
	mustNamespace(t, ns)
	for _, f := range fullFixtures(ns) {
		t.Run(f.kind, func(t *testing.T) {
			ctx := testContext(t)
			sent, err := crds.ToUnstructured(f.obj)
			if err != nil {
				t.Fatal(err)
			}
			if f.inlineStatus {
				sent.Object["status"] = mustToMap(t, f.status(1))
			}
			client := resourceClient(dyn, f, sent)
			if _, err := client.Create(ctx, sent, metav1.CreateOptions{FieldValidation: strict}); err != nil {
				t.Fatalf("create: %v", err)
			}
			t.Cleanup(func() { _ = client.Delete(testContext(t), sent.GetName(), metav1.DeleteOptions{}) })

			read, err := client.Get(ctx, sent.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			got, err := f.decode(read)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(field(f.obj, "Spec"), field(got, "Spec")); diff != "" {
				t.Errorf("spec changed on the way through the apiserver (-sent +read):\n%s", diff)
			}
			if read.GetName() != sent.GetName() || read.GetNamespace() != sent.GetNamespace() {
				t.Errorf("read %s/%s, sent %s/%s", read.GetNamespace(), read.GetName(), sent.GetNamespace(), sent.GetName())
			}

			if f.inlineStatus { // created with its status: it must have come back whole
				if diff := cmp.Diff(f.status(1), field(got, "Status"), equalTimes); diff != "" {
					t.Errorf("status changed on the way through the apiserver (-sent +read):\n%s", diff)
				}
				return
			}
			status := f.status(read.GetGeneration())
			read.Object["status"] = mustToMap(t, status)
			if _, err := client.UpdateStatus(ctx, read, metav1.UpdateOptions{FieldValidation: strict}); err != nil {
				t.Fatalf("update status: %v", err)
			}
			read, err = client.Get(ctx, sent.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get after status update: %v", err)
			}
			got, err = f.decode(read)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(status, field(got, "Status"), equalTimes); diff != "" {
				t.Errorf("status changed on the way through the apiserver (-sent +read):\n%s", diff)
			}
		})
	}
}

// resourceClient is the dynamic client for f's resource, namespaced when the object is.
func resourceClient(dyn dynamic.Interface, f fixture, u *unstructured.Unstructured) dynamic.ResourceInterface {
	if ns := u.GetNamespace(); ns != "" {
		return dyn.Resource(f.gvr).Namespace(ns)
	}
	return dyn.Resource(f.gvr)
}

// field returns the named field of a pointer to one of the kinds.
func field(obj any, name string) any {
	return reflect.ValueOf(obj).Elem().FieldByName(name).Interface()
}
