package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// notEnforcedYet is what the daemon logs when its admission policies were applied but the
// apiserver did not enforce them within the wait: the mirror's first file must come before it.
const notEnforcedYet = "approver policies not enforced yet"

// deny makes the apiserver refuse, for as long as the test runs, the operations on resources
// (of group) whose object fails expression (CEL); it returns once probe, an attempt of such an
// operation (a dry run), is refused by the policy.
func deny(t *testing.T, name, group, resource string, operation admissionregistrationv1.OperationType, expression string, probe func() error) (lift func()) {
	t.Helper()
	ctx := context.Background()
	vap := kubernetes.NewForConfigOrDie(planes.Of(t).AdminConfig()).AdmissionregistrationV1()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{operation},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}}},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: "refused by the test's policy " + name}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	if _, err := vap.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vap.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lift = func() {
		_ = vap.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = vap.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	t.Cleanup(lift)
	testenv.Eventually(t, time.Minute, "the policy "+name+" in force", func() (bool, string) {
		err := probe()
		return err != nil && strings.Contains(err.Error(), name), fmt.Sprint(err)
	})
	return lift
}

// namespaceProbe tries to create the namespace name (a dry run).
func namespaceProbe(t *testing.T, name string) func() error {
	kube := kubernetes.NewForConfigOrDie(planes.Of(t).AdminConfig())
	return func() error {
		_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
}

// firstFileBefore waits for path on the world's remote and fails the test when the daemon had
// already logged late (it was not the first).
func firstFileBefore(w *wbWorld, path, late string) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, "the first file on the remote", func() (bool, string) {
		log := w.d.Output() // read before the remote: a file seen after it came after this log
		if ok, _ := remoteHas(w.srv, path)(); !ok {
			return false, "not yet"
		}
		if strings.Contains(log, late) {
			w.t.Fatalf("the daemon logged %q before the mirror's first file reached the remote:\n%s", late, log)
		}
		return true, ""
	}, w.d.FailFast())
}

// TestMirrorStartsWithoutItsNamespace: a local run, write-back off, whose namespace does not exist
// and may not be created (an admission policy refuses it). The daemon says at once what to
// create (and write-back, degraded, says the same, not to grant rights on Secrets there), and the
// mirror's first file reaches the remote without waiting for the admission policies, which cannot
// be applied there.
func TestMirrorStartsWithoutItsNamespace(t *testing.T) {
	planes.Lend(t)
	const home = "gr-nowhere"
	deny(t, "no-"+home, "", "namespaces", admissionregistrationv1.Create, fmt.Sprintf("object.metadata.name != %q", home), namespaceProbe(t, home))
	w := prepareWBWorld(t, "homeless", crds.WriteBack{})
	w.d = startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--namespace", home)
	firstFileBefore(w, w.cmPath("seed"), notEnforcedYet)
	testenv.Eventually(t, time.Minute, "the advice to create the namespace, at once and from write-back", func() (bool, string) {
		out := w.d.Output()
		return strings.Contains(out, "create namespace "+home) && strings.Contains(out, "key of the proposals' seals") &&
			!strings.Contains(out, "get/create on Secrets"), "not logged yet"
	}, w.d.FailFast())
}

// TestMirrorStartsBeforeThePoliciesAreEnforced: a local run whose namespace does not exist yet,
// with write-back on. The daemon creates its namespace and applies its admission policies, which
// the apiserver is kept from confirming (a policy of the test refuses the daemon's probe): the
// mirror's first file reaches the remote all the same. Once the probe passes, write-back runs
// and takes its baseline.
func TestMirrorStartsBeforeThePoliciesAreEnforced(t *testing.T) {
	planes.Lend(t)
	const home = "gr-new-home"
	dyn := dynamic.NewForConfigOrDie(planes.Of(t).AdminConfig())
	if err := crds.Install(context.Background(), planes.Of(t).AdminConfig(), discardLogger()); err != nil {
		t.Fatal(err)
	}
	probe := func() error { // a Proposal such as the daemon's probe of its policies, in a namespace that exists
		p, err := crds.ToUnstructured(&crds.Proposal{
			TypeMeta:   metav1.TypeMeta{APIVersion: crds.GroupVersion.String(), Kind: crds.KindProposal},
			ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: "default"},
			Spec: crds.ProposalSpec{DestinationRef: crds.LocalReference{Name: "approver-probe"}, Change: crds.ChangeCreate,
				Target: crds.ProposalTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: "default", Name: "probe"},
				Path:   "probe.yaml", SourceCommit: strings.Repeat("0", 40), Author: crds.GitAuthor{Name: "probe", Email: "probe@invalid"},
				Desired: "kind: ConfigMap\n", Diff: "-\n"},
		})
		if err != nil {
			return err
		}
		_, err = dyn.Resource(crds.Proposals).Namespace("default").Create(context.Background(), p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	lift := deny(t, "no-approver-probe", crds.Group, "proposals", admissionregistrationv1.Create,
		"object.spec.destinationRef.name != 'approver-probe'", probe)
	w := prepareWBWorld(t, "early-start", crds.WriteBack{Enabled: true})
	w.d = startDaemon(t, t.TempDir(), "--git-batch-quiet-ms", "200", "--namespace", home)
	firstFileBefore(w, w.cmPath("seed"), notEnforcedYet)
	if out := w.d.Output(); !strings.Contains(out, "created the daemon's namespace") {
		t.Errorf("the daemon did not create its namespace %s:\n%s", home, out)
	}
	lift()
	w.waitBaseline(true)
}
