package crds_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/testenv"
)

// TestKubectlExplainShowsDescriptions runs the real kubectl against the apiserver: the field
// descriptions of the CRDs must reach users through the published OpenAPI.
func TestKubectlExplainShowsDescriptions(t *testing.T) {
	mustInstall(t)
	ctx := testContext(t)
	bins, err := testenv.EnsureBinaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field string
		want  string
	}{
		{"gitrepoconfigs.spec.repoUrl", "must not embed credentials"},
		{"grc.spec.secretRef", "bearerToken"},
		{"gitdestinations.spec.baseFolder", "clean relative POSIX path"},
		{"gd.spec.repoRef.namespace", "defaults to the GitDestination's own"},
		{"watchrules.spec.rules.resources", "desired-state default set"},
		{"cwr.spec.rules.scope", "Cluster"},
		{"wr.status.conditions.reason", "CamelCase"},
		{"gd.spec.writeBack.autoApply", "a destroy is never auto-applied"},
		{"gitdestinations.status.writeBack.lastHandledSyncNow", "configbutler.ai/sync-now"},
		{"proposals.spec.decision", "which a person sets"},
		{"proposals.spec.decidedBy", "who set spec.decision"},
		{"prop.spec.liveDigest", "sha256"},
		{"prop.status.reviewedBy.username", "Username of the reviewer"},
		{"syncruns.spec.trigger", "sync-now"},
		{"sr.status.refused.reason", "CamelCase"},
		{"receivers.spec.type", "X-Hub-Signature-256"},
		{"rcv.spec.resources.kind", "all of the repository's destinations"},
		{"rcv.status.webhookPath", "hex sha256 of the token"},
		{"grc.spec.receiver", "owned by this GitRepoConfig"},
		{"gitrepoconfigs.status.receiver.secretName", "holds the token to give the Git host"},
		{"grc.spec.commitSigning", "never writes unsigned commits"},
		{"gitrepoconfigs.status.signingKey.publicKey", "an authorized_keys line (ssh)"},
		{"wr.spec.rules.excludeUsers", "without attribution this list matches nothing"},
		{"cwr.spec.rules.excludeFieldManagers", "of the object itself, not its status"},
		{"watchrules.spec.rules.keepGenerated", "kube-root-ca.crt"},
		{"gd.status.skipped.reason", "changes_skipped_total"},
		{"gd.spec.clusterRef", "whose objects this destination mirrors"},
		{"remoteclusters.spec.kubeConfig.secretRef.key", "the key Cluster API writes"},
		{"rcl.spec.kubeConfig.secretRef", "--remote-allow-exec"},
		{"rcl.spec.namespaces", "none: rules select nothing of the cluster"},
		{"remoteclusters.status.attribution", "credited to the people who made them"},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			var out string
			// The apiserver publishes the OpenAPI of a new CRD a moment after it is Established.
			err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				b, err := exec.CommandContext(ctx, bins.Kubectl, "--kubeconfig", kubeconfig, "explain", tc.field).CombinedOutput()
				out = string(b)
				// kubectl wraps long descriptions; compare with the whitespace collapsed.
				return err == nil && strings.Contains(strings.Join(strings.Fields(out), " "), tc.want), nil
			})
			if err != nil {
				t.Fatalf("kubectl explain %s never showed %q; last output:\n%s", tc.field, tc.want, out)
			}
		})
	}
}

// TestShortNamesAreFree: kubectl resolves a short name to the built-in resource when one has it
// (ReplicationController's rc, say), so a kind's short name must be no other resource's name or
// short name, or `kubectl get <short>` would show the other resource and warn on every use.
func TestShortNamesAreFree(t *testing.T) {
	mustInstall(t)
	disco, err := discovery.NewDiscoveryClientForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	lists, err := disco.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		t.Fatal(err)
	}
	taken := map[string]string{} // a name or short name of a resource outside our group: the resource
	for _, list := range lists {
		if strings.HasPrefix(list.GroupVersion, crds.Group+"/") {
			continue
		}
		for _, r := range list.APIResources {
			for _, name := range append([]string{r.Name, r.SingularName}, r.ShortNames...) {
				taken[name] = r.Name + " (" + list.GroupVersion + ")"
			}
		}
	}
	defs, err := crds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range defs {
		for _, short := range crd.Spec.Names.ShortNames {
			if other, ok := taken[short]; ok {
				t.Errorf("%s: short name %q is taken by %s", crd.Spec.Names.Kind, short, other)
			}
		}
	}
}
