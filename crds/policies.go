package crds

import (
	"context"
	"embed"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// ApproverPolicy says which admission policies make an approval carry its approver in a
// Proposal's spec.decidedBy (--approver-policy).
type ApproverPolicy string

// Values of ApproverPolicy.
const (
	// ApproverPolicyMutating installs both policies: the apiserver writes the user who changes
	// spec.decision into spec.decidedBy (where it serves MutatingAdmissionPolicy, 1.36 and
	// later) and refuses any other value.
	ApproverPolicyMutating ApproverPolicy = "mutating"
	// ApproverPolicyValidating installs only the validating policy: an approval must name its
	// approver in spec.decidedBy, and the apiserver refuses any other name (1.30 and later).
	ApproverPolicyValidating ApproverPolicy = "validating"
	// ApproverPolicyNone installs neither and removes the daemon's own: who decided is known only
	// from the admission webhook.
	ApproverPolicyNone ApproverPolicy = "none"
)

// ApproverPolicyName names the daemon's policies and their bindings.
const ApproverPolicyName = "gitops-reverser-approver"

// The admission policy kinds, served by admissionregistration.k8s.io/v1.
var (
	ValidatingAdmissionPolicies       = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	ValidatingAdmissionPolicyBindings = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	MutatingAdmissionPolicies         = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"}
	MutatingAdmissionPolicyBindings   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"}
	validatingPolicyFiles             = []policyFile{{"validating.yaml", ValidatingAdmissionPolicies}, {"validating-binding.yaml", ValidatingAdmissionPolicyBindings}}
	mutatingPolicyFiles               = []policyFile{{"mutating.yaml", MutatingAdmissionPolicies}, {"mutating-binding.yaml", MutatingAdmissionPolicyBindings}}
	errPolicyAPIUnserved              = errors.New("the apiserver does not serve this admission policy API")
)

// policyFile is one embedded policy object and the resource it is.
type policyFile struct {
	name string
	gvr  schema.GroupVersionResource
}

//go:embed policies/*.yaml
var policyManifests embed.FS

// policyObjects returns the embedded objects of the given files, in order.
func policyObjects(files []policyFile) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(files))
	for _, f := range files {
		data, err := policyManifests.ReadFile("policies/" + f.name)
		if err != nil {
			return nil, fmt.Errorf("read embedded policy %s: %w", f.name, err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("parse embedded policy %s: %w", f.name, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// InstallApproverPolicies makes the cluster hold the daemon's admission policies that mode asks
// for: it server-side applies them (policy, then binding) and deletes its own that mode does not
// ask for (binding, then policy). A policy whose API the apiserver does not serve is skipped:
// the mutating one before Kubernetes 1.36, both before 1.30. It returns what it installed.
func InstallApproverPolicies(ctx context.Context, dyn dynamic.Interface, mode ApproverPolicy) (installed []string, err error) {
	want := map[ApproverPolicy][2]bool{ // validating, mutating
		ApproverPolicyMutating: {true, true}, ApproverPolicyValidating: {true, false}, ApproverPolicyNone: {false, false},
	}[mode]
	for i, files := range [][]policyFile{validatingPolicyFiles, mutatingPolicyFiles} {
		kind := files[0].gvr.Resource
		if !want[i] {
			if err := deletePolicy(ctx, dyn, files); err != nil {
				return installed, err
			}
			continue
		}
		err := applyPolicy(ctx, dyn, files)
		switch {
		case errors.Is(err, errPolicyAPIUnserved):
		case err != nil:
			return installed, err
		default:
			installed = append(installed, kind)
		}
	}
	return installed, nil
}

func applyPolicy(ctx context.Context, dyn dynamic.Interface, files []policyFile) error {
	objs, err := policyObjects(files)
	if err != nil {
		return err
	}
	for i, obj := range objs {
		_, err := dyn.Resource(files[i].gvr).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("apply %s %s: %w", files[i].gvr.Resource, obj.GetName(), errPolicyAPIUnserved)
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", files[i].gvr.Resource, obj.GetName(), err)
		}
	}
	return nil
}

func deletePolicy(ctx context.Context, dyn dynamic.Interface, files []policyFile) error {
	for i := len(files) - 1; i >= 0; i-- {
		err := dyn.Resource(files[i].gvr).Delete(ctx, ApproverPolicyName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", files[i].gvr.Resource, ApproverPolicyName, err)
		}
	}
	return nil
}
