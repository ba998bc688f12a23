package crds

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

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

// ApproverPolicyName names the daemon's policies, their bindings and its record of them: a
// ConfigMap in the daemon's namespace.
const ApproverPolicyName = "gitops-reverser-approver"

// Keys of the record ConfigMap. daemon is the daemon's own user, the only one the policies let
// create Proposals and SyncRuns; epoch is the stamp the mutating policy writes into
// spec.decidedBy; policies records the uid and generation of each policy object as it was
// applied with that epoch, so that a policy deleted, replaced or changed since is seen
// (CheckApproverPolicies). The policies do not read it: the daemon writes the user and the epoch
// into their expressions, so nothing but the policy objects themselves decides what they admit.
const (
	recordDaemon   = "daemon"
	recordEpoch    = "epoch"
	recordPolicies = "policies"
)

// Placeholders in the embedded policies for what the daemon writes in when it applies them.
const (
	placeholderDaemon = "__DAEMON__"
	placeholderEpoch  = "__EPOCH__"
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

// ApproverParams are what the daemon writes into its policies and where it keeps its record.
type ApproverParams struct {
	Namespace string // the daemon's: where the record ConfigMap lives
	Daemon    string // the daemon's own user
}

// policyObjects returns the embedded objects of the given files, in order, with the daemon's user
// and the epoch written in.
func policyObjects(files []policyFile, daemon, epoch string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(files))
	quote := strings.NewReplacer(`\`, `\\`, `'`, `\'`) // inside a CEL string literal
	fill := strings.NewReplacer(placeholderDaemon, quote.Replace(daemon), placeholderEpoch, quote.Replace(epoch))
	for _, f := range files {
		data, err := policyManifests.ReadFile("policies/" + f.name)
		if err != nil {
			return nil, fmt.Errorf("read embedded policy %s: %w", f.name, err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("parse embedded policy %s: %w", f.name, err)
		}
		u.Object = fillStrings(u.Object, fill).(map[string]any)
		out = append(out, u)
	}
	return out, nil
}

// fillStrings replaces the placeholders in every string of a decoded YAML value.
func fillStrings(v any, fill *strings.Replacer) any {
	switch t := v.(type) {
	case string:
		return fill.Replace(t)
	case map[string]any:
		for k, e := range t {
			t[k] = fillStrings(e, fill)
		}
	case []any:
		for i, e := range t {
			t[i] = fillStrings(e, fill)
		}
	}
	return v
}

// InstallApproverPolicies makes the cluster hold the daemon's admission policies that mode asks
// for: it server-side applies them (policy, then binding), with the daemon's user and the epoch
// written in, and deletes its own that mode does not ask for (binding, then policy). A policy
// whose API the apiserver does not serve is skipped: the mutating one before Kubernetes 1.36, both
// before 1.30. When any policy object is not the one its record names, it draws a new epoch and
// applies them again, so no stamp written before is trusted; an unchanged policy keeps its epoch
// across restarts and failovers. It returns what it installed and whether it drew.
func InstallApproverPolicies(ctx context.Context, dyn dynamic.Interface, mode ApproverPolicy, params ApproverParams) (installed []string, drawn bool, err error) {
	want := map[ApproverPolicy][2]bool{ // validating, mutating
		ApproverPolicyMutating: {true, true}, ApproverPolicyValidating: {true, false}, ApproverPolicyNone: {false, false},
	}[mode]
	if !want[0] {
		installed, err = applyPolicies(ctx, dyn, want, "", "")
		return installed, false, err
	}
	records := dyn.Resource(ConfigMaps).Namespace(params.Namespace)
	record, err := readRecord(ctx, records, params.Namespace)
	if err != nil {
		return nil, false, err
	}
	daemon, epoch, recorded := recordOf(record)
	for {
		if installed, err = applyPolicies(ctx, dyn, want, params.Daemon, epoch); err != nil {
			return installed, drawn, err
		}
		now, err := policyIdentities(ctx, dyn)
		if err != nil {
			return installed, drawn, err
		}
		switch {
		case drawn: // applied with the epoch just drawn: record them as they are now
			return installed, true, writeRecord(ctx, records, record, map[string]string{recordDaemon: params.Daemon, recordEpoch: epoch, recordPolicies: now})
		case epoch != "" && recorded == now && daemon == params.Daemon:
			return installed, false, nil
		}
		if epoch, err = newEpoch(); err != nil {
			return installed, false, err
		}
		drawn = true
	}
}

// applyPolicies applies the policies want asks for (validating, mutating) and deletes the others.
func applyPolicies(ctx context.Context, dyn dynamic.Interface, want [2]bool, daemon, epoch string) (installed []string, err error) {
	for i, files := range [][]policyFile{validatingPolicyFiles, mutatingPolicyFiles} {
		if !want[i] {
			if err := deletePolicy(ctx, dyn, files); err != nil {
				return installed, err
			}
			continue
		}
		err := applyPolicy(ctx, dyn, files, daemon, epoch)
		switch {
		case errors.Is(err, errPolicyAPIUnserved):
		case err != nil:
			return installed, err
		default:
			installed = append(installed, files[0].gvr.Resource)
		}
	}
	return installed, nil
}

// readRecord reads the record ConfigMap, creating an empty one when missing.
func readRecord(ctx context.Context, records dynamic.ResourceInterface, namespace string) (*unstructured.Unstructured, error) {
	cm, err := records.Get(ctx, ApproverPolicyName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": ApproverPolicyName, "labels": map[string]any{LabelManagedBy: ManagedByDaemon}}}}
		if cm, err = records.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager}); apierrors.IsAlreadyExists(err) {
			cm, err = records.Get(ctx, ApproverPolicyName, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", namespace, ApproverPolicyName, err)
	}
	return cm, nil
}

// recordOf reads the daemon's user, the epoch and the policies' identities from the record.
func recordOf(record *unstructured.Unstructured) (daemon, epoch, policies string) {
	daemon, _, _ = unstructured.NestedString(record.Object, "data", recordDaemon)
	epoch, _, _ = unstructured.NestedString(record.Object, "data", recordEpoch)
	policies, _, _ = unstructured.NestedString(record.Object, "data", recordPolicies)
	return daemon, epoch, policies
}

// writeRecord writes data into the record as read: the update is conditional on its
// resourceVersion, so of two replicas drawing at once one wins and the other retries.
func writeRecord(ctx context.Context, records dynamic.ResourceInterface, record *unstructured.Unstructured, data map[string]string) error {
	for k, v := range data {
		if err := unstructured.SetNestedField(record.Object, v, "data", k); err != nil {
			return err
		}
	}
	if _, err := records.Update(ctx, record, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("record the epoch of the admission policies in ConfigMap %s: %w", ApproverPolicyName, err)
	}
	return nil
}

// CheckApproverPolicies reads (from etcd, not a cache) the record and every policy object and
// returns the current epoch, or ErrApproverPoliciesChanged naming what differs from the record.
// Read after a decision was seen, an unchanged record proves that the policies in force when the
// epoch was drawn were in force without a break until now, so a decision stamped with that epoch
// was written by them.
func CheckApproverPolicies(ctx context.Context, dyn dynamic.Interface, namespace string) (string, error) {
	cm, err := dyn.Resource(ConfigMaps).Namespace(namespace).Get(ctx, ApproverPolicyName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read ConfigMap %s/%s: %w", namespace, ApproverPolicyName, err)
	}
	_, epoch, recorded := recordOf(cm)
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

func applyPolicy(ctx context.Context, dyn dynamic.Interface, files []policyFile, daemon, epoch string) error {
	objs, err := policyObjects(files, daemon, epoch)
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

// probeUser is the name a probe puts in spec.decidedBy, to see it refused: nobody is called so.
const probeUser = "system:gitops-reverser:approver-probe"

// WaitApproverPolicies waits until the apiserver enforces the policies mode installs, as they are
// now: a Proposal the daemon creates in namespace as a dry run is stamped with the current epoch
// (mutating) or, under the validating policy alone, refused when it names someone else. The
// apiserver takes up new policy objects moments after they are written, and an
// approval stamped meanwhile is asked again: waiting keeps that from the daemon's own start. It
// polls until ctx ends.
func WaitApproverPolicies(ctx context.Context, dyn dynamic.Interface, mode ApproverPolicy, namespace string) error {
	if mode == ApproverPolicyNone {
		return nil
	}
	var last error
	for {
		if last = approverPoliciesEnforced(ctx, dyn, mode, namespace); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the apiserver does not enforce the admission policies yet: %w", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func approverPoliciesEnforced(ctx context.Context, dyn dynamic.Interface, mode ApproverPolicy, namespace string) error {
	epoch, err := CheckApproverPolicies(ctx, dyn, namespace)
	if err != nil {
		return err
	}
	probe := &Proposal{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: KindProposal},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "approver-probe-", Namespace: namespace},
		Spec: ProposalSpec{
			DestinationRef: LocalReference{Name: "approver-probe"}, Change: ChangeCreate,
			Target: ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: namespace, Name: "approver-probe"},
			Path:   "approver-probe.yaml", SourceCommit: strings.Repeat("0", 40),
			Author: GitAuthor{Name: "probe", Email: "probe@invalid"}, Desired: "kind: ConfigMap\n", Diff: "-\n",
			Decision: DecisionApprove,
		},
	}
	if mode == ApproverPolicyValidating {
		probe.Spec.DecidedBy = &Reviewer{Username: probeUser}
	}
	u, err := ToUnstructured(probe)
	if err != nil {
		return err
	}
	created, err := dyn.Resource(Proposals).Namespace(namespace).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case mode == ApproverPolicyValidating && err != nil && strings.Contains(err.Error(), ApproverPolicyName):
		return nil
	case mode == ApproverPolicyValidating && err == nil:
		return errors.New("a Proposal naming someone else as its approver was admitted")
	case err != nil:
		return fmt.Errorf("dry-run a Proposal in %s: %w", namespace, err)
	}
	if stamp, _, _ := unstructured.NestedString(created.Object, "spec", "decidedBy", "stamp"); stamp != epoch {
		return fmt.Errorf("a decision is stamped %q, not the current epoch %q", stamp, epoch)
	}
	return nil
}
