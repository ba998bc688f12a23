package crds

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

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

// ApproverPolicyName names the daemon's policies, their bindings and their params: a ConfigMap
// in the daemon's namespace.
const ApproverPolicyName = "gitops-reverser-approver"

// Keys of the params ConfigMap. daemon is the daemon's own user, the only one that may create
// Proposals and SyncRuns; epoch is the stamp the mutating policy writes into spec.decidedBy;
// policies records the uid and generation of each policy object when epoch was drawn, so that a
// policy deleted, replaced or changed since is seen (CheckApproverPolicies).
const (
	ParamDaemon   = "daemon"
	ParamEpoch    = "epoch"
	ParamPolicies = "policies"
)

// The admission policy kinds, served by admissionregistration.k8s.io/v1.
var (
	ValidatingAdmissionPolicies       = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	ValidatingAdmissionPolicyBindings = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	MutatingAdmissionPolicies         = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"}
	MutatingAdmissionPolicyBindings   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"}
	ConfigMaps                        = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	validatingPolicyFiles             = []policyFile{{"validating.yaml", ValidatingAdmissionPolicies}, {"validating-binding.yaml", ValidatingAdmissionPolicyBindings}}
	mutatingPolicyFiles               = []policyFile{{"mutating.yaml", MutatingAdmissionPolicies}, {"mutating-binding.yaml", MutatingAdmissionPolicyBindings}}
	errPolicyAPIUnserved              = errors.New("the apiserver does not serve this admission policy API")
)

// PolicyResources are the four kinds of the daemon's policy objects, validating first.
var PolicyResources = []schema.GroupVersionResource{ValidatingAdmissionPolicies, ValidatingAdmissionPolicyBindings,
	MutatingAdmissionPolicies, MutatingAdmissionPolicyBindings}

// ErrApproverPoliciesChanged says a policy object is not the one the current epoch was drawn
// for: deleted, replaced or changed since. No stamp of that epoch is trusted.
var ErrApproverPoliciesChanged = errors.New("the daemon's admission policies changed since their epoch was drawn")

// policyFile is one embedded policy object and the resource it is.
type policyFile struct {
	name string
	gvr  schema.GroupVersionResource
}

//go:embed policies/*.yaml
var policyManifests embed.FS

// ApproverParams are what the policies read from their params ConfigMap.
type ApproverParams struct {
	Namespace string // the daemon's: where the ConfigMap lives
	Daemon    string // the daemon's own user
}

// policyObjects returns the embedded objects of the given files, in order, their params in namespace.
func policyObjects(files []policyFile, namespace string) ([]*unstructured.Unstructured, error) {
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
		if _, ok, _ := unstructured.NestedMap(u.Object, "spec", "paramRef"); ok {
			if err := unstructured.SetNestedField(u.Object, namespace, "spec", "paramRef", "namespace"); err != nil {
				return nil, err
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// InstallApproverPolicies makes the cluster hold the daemon's admission policies that mode asks
// for: it writes their params (the daemon's user), server-side applies them (policy, then binding)
// and deletes its own that mode does not ask for (binding, then policy). A policy whose API the
// apiserver does not serve is skipped: the mutating one before Kubernetes 1.36, both before
// 1.30. When any policy object is not the one the current epoch was drawn for, it draws a new
// epoch, so no stamp written before is trusted. It returns what it installed and whether it drew.
func InstallApproverPolicies(ctx context.Context, dyn dynamic.Interface, mode ApproverPolicy, params ApproverParams) (installed []string, drawn bool, err error) {
	want := map[ApproverPolicy][2]bool{ // validating, mutating
		ApproverPolicyMutating: {true, true}, ApproverPolicyValidating: {true, false}, ApproverPolicyNone: {false, false},
	}[mode]
	if want[0] {
		if err := ensureParams(ctx, dyn, params); err != nil {
			return nil, false, err
		}
	}
	for i, files := range [][]policyFile{validatingPolicyFiles, mutatingPolicyFiles} {
		kind := files[0].gvr.Resource
		if !want[i] {
			if err := deletePolicy(ctx, dyn, files); err != nil {
				return installed, false, err
			}
			continue
		}
		err := applyPolicy(ctx, dyn, files, params.Namespace)
		switch {
		case errors.Is(err, errPolicyAPIUnserved):
		case err != nil:
			return installed, false, err
		default:
			installed = append(installed, kind)
		}
	}
	if !want[0] {
		return installed, false, nil
	}
	drawn, err = drawEpoch(ctx, dyn, params.Namespace)
	return installed, drawn, err
}

// ensureParams creates the params ConfigMap, or corrects the daemon's user in it.
func ensureParams(ctx context.Context, dyn dynamic.Interface, params ApproverParams) error {
	client := dyn.Resource(ConfigMaps).Namespace(params.Namespace)
	cm, err := client.Get(ctx, ApproverPolicyName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		epoch, err := newEpoch()
		if err != nil {
			return err
		}
		cm = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": ApproverPolicyName, "labels": map[string]any{"app.kubernetes.io/managed-by": "gitops-reverser"}},
			"data":     map[string]any{ParamDaemon: params.Daemon, ParamEpoch: epoch}}}
		if _, err := client.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ConfigMap %s/%s: %w", params.Namespace, ApproverPolicyName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s/%s: %w", params.Namespace, ApproverPolicyName, err)
	}
	if daemon, _, _ := unstructured.NestedString(cm.Object, "data", ParamDaemon); daemon == params.Daemon {
		return nil
	}
	if err := unstructured.SetNestedField(cm.Object, params.Daemon, "data", ParamDaemon); err != nil {
		return err
	}
	if _, err := client.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("update ConfigMap %s/%s: %w", params.Namespace, ApproverPolicyName, err)
	}
	return nil
}

// drawEpoch writes a new epoch and the identities of the policy objects as they are now, unless
// the recorded ones already are: an unchanged policy keeps its epoch across restarts and failovers,
// so an approval stamped while the daemon was away still counts.
func drawEpoch(ctx context.Context, dyn dynamic.Interface, namespace string) (bool, error) {
	client := dyn.Resource(ConfigMaps).Namespace(namespace)
	cm, err := client.Get(ctx, ApproverPolicyName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("read ConfigMap %s/%s: %w", namespace, ApproverPolicyName, err)
	}
	now, err := policyIdentities(ctx, dyn)
	if err != nil {
		return false, err
	}
	recorded, _, _ := unstructured.NestedString(cm.Object, "data", ParamPolicies)
	if recorded == now {
		return false, nil
	}
	epoch, err := newEpoch()
	if err != nil {
		return false, err
	}
	if err := unstructured.SetNestedField(cm.Object, epoch, "data", ParamEpoch); err != nil {
		return false, err
	}
	if err := unstructured.SetNestedField(cm.Object, now, "data", ParamPolicies); err != nil {
		return false, err
	}
	// The update is conditional on the resourceVersion read: two replicas drawing at once
	// leave one epoch, and the loser sees a conflict and reads the winner's.
	if _, err := client.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return false, fmt.Errorf("draw a new epoch in ConfigMap %s/%s: %w", namespace, ApproverPolicyName, err)
	}
	return true, nil
}

// CheckApproverPolicies reads (from etcd, not a cache) the params and every policy object and
// returns the current epoch, or ErrApproverPoliciesChanged naming what differs from the record.
// Read after a decision was seen, an unchanged record proves that the policies in force when the
// epoch was drawn were in force without a break until now, so a decision stamped with that epoch
// was written by them.
func CheckApproverPolicies(ctx context.Context, dyn dynamic.Interface, namespace string) (string, error) {
	cm, err := dyn.Resource(ConfigMaps).Namespace(namespace).Get(ctx, ApproverPolicyName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read ConfigMap %s/%s: %w", namespace, ApproverPolicyName, err)
	}
	epoch, _, _ := unstructured.NestedString(cm.Object, "data", ParamEpoch)
	recorded, _, _ := unstructured.NestedString(cm.Object, "data", ParamPolicies)
	now, err := policyIdentities(ctx, dyn)
	if err != nil {
		return "", err
	}
	if epoch == "" || recorded != now {
		return "", fmt.Errorf("%w: %s", ErrApproverPoliciesChanged, describeChange(recorded, now))
	}
	return epoch, nil
}

// policyIdentities is "resource=uid/generation" of each policy object, "resource=-" when absent
// or not served, joined by ";" in the order of PolicyResources.
func policyIdentities(ctx context.Context, dyn dynamic.Interface) (string, error) {
	parts := make([]string, 0, len(PolicyResources))
	for _, gvr := range PolicyResources {
		u, err := dyn.Resource(gvr).Get(ctx, ApproverPolicyName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			parts = append(parts, gvr.Resource+"=-")
		case err != nil:
			return "", fmt.Errorf("read %s %s: %w", gvr.Resource, ApproverPolicyName, err)
		default:
			parts = append(parts, fmt.Sprintf("%s=%s/%d", gvr.Resource, u.GetUID(), u.GetGeneration()))
		}
	}
	return strings.Join(parts, ";"), nil
}

// describeChange names the policy objects whose identity differs between two records.
func describeChange(recorded, now string) string {
	was := map[string]string{}
	for _, p := range strings.Split(recorded, ";") {
		k, v, _ := strings.Cut(p, "=")
		was[k] = v
	}
	var out []string
	for _, p := range strings.Split(now, ";") {
		k, v, _ := strings.Cut(p, "=")
		switch old := was[k]; {
		case old == v:
		case v == "-":
			out = append(out, k+" "+ApproverPolicyName+" deleted")
		case old == "" || old == "-":
			out = append(out, k+" "+ApproverPolicyName+" created")
		case strings.Split(old, "/")[0] != strings.Split(v, "/")[0]:
			out = append(out, k+" "+ApproverPolicyName+" replaced")
		default:
			out = append(out, k+" "+ApproverPolicyName+" changed")
		}
	}
	if len(out) == 0 {
		return "no epoch drawn yet"
	}
	return strings.Join(out, ", ")
}

func newEpoch() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("draw an epoch: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func applyPolicy(ctx context.Context, dyn dynamic.Interface, files []policyFile, namespace string) error {
	objs, err := policyObjects(files, namespace)
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
