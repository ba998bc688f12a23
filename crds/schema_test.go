package crds_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
)

// These tests need no apiserver: they check the embedded YAML against the Go API and the
// apiserver's own CRD validation, so a broken schema fails in milliseconds (go test -short).

func mustCRDs(tb testing.TB) map[string]*apiextensionsv1.CustomResourceDefinition {
	tb.Helper()
	defs, err := crds.CRDs()
	if err != nil {
		tb.Fatalf("CRDs: %v", err)
	}
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, d := range defs {
		byKind[d.Spec.Names.Kind] = d
	}
	return byKind
}

func rootSchema(crd *apiextensionsv1.CustomResourceDefinition) apiextensionsv1.JSONSchemaProps {
	return *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// walkSchema calls visit for every property below s, depth first in name order; path uses
// "[]" for array items, e.g. "spec.rules[].scope".
func walkSchema(path string, s apiextensionsv1.JSONSchemaProps, visit func(path string, s apiextensionsv1.JSONSchemaProps)) {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := strings.TrimPrefix(path+"."+name, ".")
		visit(p, s.Properties[name])
		walkSchema(p, s.Properties[name], visit)
	}
	if s.Items != nil && s.Items.Schema != nil {
		visit(path+"[]", *s.Items.Schema)
		walkSchema(path+"[]", *s.Items.Schema, visit)
	}
}

func TestCRDsMatchTheGoAPI(t *testing.T) {
	byKind := mustCRDs(t)
	if len(byKind) != 10 {
		t.Fatalf("got %d CRDs, want 10", len(byKind))
	}
	cases := []struct {
		kind  string
		gvr   schema.GroupVersionResource
		scope apiextensionsv1.ResourceScope
		short string
		// statusSubresource: status is written only through /status. A SyncRun is created by
		// the daemon with its status in one call, so it has none.
		statusSubresource bool
	}{
		{crds.KindGitRepoConfig, crds.GitRepoConfigs, apiextensionsv1.NamespaceScoped, "grc", true},
		{crds.KindGitDestination, crds.GitDestinations, apiextensionsv1.NamespaceScoped, "gd", true},
		{crds.KindWatchRule, crds.WatchRules, apiextensionsv1.NamespaceScoped, "wr", true},
		{crds.KindClusterWatchRule, crds.ClusterWatchRules, apiextensionsv1.ClusterScoped, "cwr", true},
		{crds.KindProposal, crds.Proposals, apiextensionsv1.NamespaceScoped, "prop", true},
		{crds.KindSyncRun, crds.SyncRuns, apiextensionsv1.NamespaceScoped, "sr", false},
		{crds.KindReceiver, crds.Receivers, apiextensionsv1.NamespaceScoped, "rcv", true},
		{crds.KindRemoteCluster, crds.RemoteClusters, apiextensionsv1.NamespaceScoped, "rcl", true},
		{crds.KindNotifyChannel, crds.NotifyChannels, apiextensionsv1.NamespaceScoped, "nch", true},
		{crds.KindNotifyRule, crds.NotifyRules, apiextensionsv1.NamespaceScoped, "nrl", true},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			crd := byKind[tc.kind]
			if crd == nil {
				t.Fatalf("no CRD for kind %s", tc.kind)
			}
			if want := tc.gvr.Resource + "." + crds.Group; crd.Name != want {
				t.Errorf("name = %q, want %q", crd.Name, want)
			}
			if crd.Spec.Group != tc.gvr.Group || crd.Spec.Names.Plural != tc.gvr.Resource {
				t.Errorf("group/plural = %s/%s, want %s/%s", crd.Spec.Group, crd.Spec.Names.Plural, tc.gvr.Group, tc.gvr.Resource)
			}
			if crd.Spec.Scope != tc.scope {
				t.Errorf("scope = %s, want %s", crd.Spec.Scope, tc.scope)
			}
			if !slices.Equal(crd.Spec.Names.ShortNames, []string{tc.short}) {
				t.Errorf("short names = %v, want [%s]", crd.Spec.Names.ShortNames, tc.short)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("got %d versions, want 1", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != tc.gvr.Version || !v.Served || !v.Storage {
				t.Errorf("version %s served=%t storage=%t, want %s served and stored", v.Name, v.Served, v.Storage, tc.gvr.Version)
			}
			if hasStatus := v.Subresources != nil && v.Subresources.Status != nil; hasStatus != tc.statusSubresource {
				t.Errorf("status subresource = %t, want %t", hasStatus, tc.statusSubresource)
			}
			if !slices.Equal(crd.Spec.Names.Categories, []string{"configbutler"}) {
				t.Errorf("categories = %v, want [configbutler]", crd.Spec.Names.Categories)
			}
		})
	}
}

func TestEverySchemaPropertyHasDescription(t *testing.T) {
	for kind, crd := range mustCRDs(t) {
		root := rootSchema(crd)
		if root.Description == "" {
			t.Errorf("%s: the root schema has no description", kind)
		}
		walkSchema("", root, func(path string, s apiextensionsv1.JSONSchemaProps) {
			// The apiserver forbids anything but type on metadata; kubectl explains ObjectMeta itself.
			if path == "metadata" {
				return
			}
			if strings.TrimSpace(s.Description) == "" {
				t.Errorf("%s: %s has no description", kind, path)
			}
		})
	}
}

// configKinds are the kinds a person writes to configure the daemon; each reports Ready.
var configKinds = []string{crds.KindGitRepoConfig, crds.KindGitDestination, crds.KindWatchRule, crds.KindClusterWatchRule, crds.KindReceiver,
	crds.KindRemoteCluster, crds.KindNotifyChannel, crds.KindNotifyRule}

func TestEveryConfigKindHasReadyPrinterColumn(t *testing.T) {
	byKind := mustCRDs(t)
	for _, kind := range configKinds {
		cols := byKind[kind].Spec.Versions[0].AdditionalPrinterColumns
		if len(cols) < 3 {
			t.Errorf("%s: got %d printer columns, want Ready, a key field and Age", kind, len(cols))
			continue
		}
		if ready := cols[0]; ready.Name != "Ready" || ready.JSONPath != `.status.conditions[?(@.type=="Ready")].status` {
			t.Errorf("%s: first column = %s %s, want the Ready condition", kind, ready.Name, ready.JSONPath)
		}
	}
}

func TestEveryKindHasAgePrinterColumnLast(t *testing.T) {
	for kind, crd := range mustCRDs(t) {
		cols := crd.Spec.Versions[0].AdditionalPrinterColumns
		if len(cols) == 0 {
			t.Errorf("%s: no printer columns", kind)
			continue
		}
		if age := cols[len(cols)-1]; age.Name != "Age" || age.Type != "date" || age.JSONPath != ".metadata.creationTimestamp" {
			t.Errorf("%s: last column = %s %s %s, want Age", kind, age.Name, age.Type, age.JSONPath)
		}
	}
}

// TestWriteBackPrinterColumns pins the columns of the write-back kinds, which show what a
// reviewer and an auditor look at first, the Receiver's (what to paste into the Git host, and
// whether it is being called), the RemoteCluster's (whether it is reached and why not, how much is
// watched there, whether its changes are credited to their authors), and the WriteBack column of
// GitDestination.
func TestWriteBackPrinterColumns(t *testing.T) {
	type col struct {
		name, typ, path string
		priority        int32
	}
	cases := map[string][]col{
		crds.KindProposal: {
			{"Change", "string", ".spec.change", 0},
			{"Kind", "string", ".spec.target.kind", 0},
			{"Namespace", "string", ".spec.target.namespace", 1},
			{"Target", "string", ".spec.target.name", 0},
			{"Phase", "string", ".status.phase", 0},
			{"Commit", "string", ".spec.sourceCommit", 0},
			{"Age", "date", ".metadata.creationTimestamp", 0},
		},
		crds.KindSyncRun: {
			{"Destination", "string", ".spec.destinationRef.name", 0},
			{"Status", "string", ".status.phase", 0},
			{"Revision", "string", ".status.revision", 0},
			{"Differences", "integer", ".status.differenceTotal", 0},
			{"Proposals", "integer", ".status.proposalsOpened", 0},
			{"Age", "date", ".metadata.creationTimestamp", 0},
		},
		crds.KindReceiver: {
			{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`, 0},
			{"Type", "string", ".spec.type", 0},
			{"Path", "string", ".status.webhookPath", 0},
			{"Last Event", "date", ".status.lastEventTime", 0},
			{"Age", "date", ".metadata.creationTimestamp", 0},
		},
		crds.KindRemoteCluster: {
			{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`, 0},
			{"Reason", "string", `.status.conditions[?(@.type=="Ready")].reason`, 0},
			{"Server", "string", ".status.server", 0},
			{"Watches", "integer", ".status.watches", 0},
			{"Attribution", "string", ".status.attribution", 0},
			{"Age", "date", ".metadata.creationTimestamp", 0},
		},
		crds.KindNotifyChannel: {
			{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`, 0},
			{"Type", "string", ".spec.type", 0},
			{"Last Sent", "date", ".status.lastSentTime", 0},
			{"Failed", "integer", ".status.failed", 0},
			{"Age", "date", ".metadata.creationTimestamp", 0},
		},
		crds.KindNotifyRule: {
			{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`, 0},
			{"Channel", "string", ".spec.channelRef.name", 0},
			{"Last Match", "date", ".status.lastMatchTime", 0},
			{"Age", "date", ".metadata.creationTimestamp", 0},
		},
	}
	byKind := mustCRDs(t)
	for kind, want := range cases {
		var got []col
		for _, c := range byKind[kind].Spec.Versions[0].AdditionalPrinterColumns {
			got = append(got, col{c.Name, c.Type, c.JSONPath, c.Priority})
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(col{})); diff != "" {
			t.Errorf("%s printer columns (-want +got):\n%s", kind, diff)
		}
	}
	wb := col{"WriteBack", "boolean", ".spec.writeBack.enabled", 1}
	var found bool
	for _, c := range byKind[crds.KindGitDestination].Spec.Versions[0].AdditionalPrinterColumns {
		found = found || (col{c.Name, c.Type, c.JSONPath, c.Priority}) == wb
	}
	if !found {
		t.Errorf("GitDestination has no printer column %+v", wb)
	}
}

// TestCRDsPassAPIServerValidation runs the apiserver's own CRD validation: structural schema,
// CEL rules compile and stay within the cost budget.
func TestCRDsPassAPIServerValidation(t *testing.T) {
	for kind, crd := range mustCRDs(t) {
		v1 := crd.DeepCopy()
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
		var internal apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, &internal, nil); err != nil {
			t.Fatalf("%s: convert: %v", kind, err)
		}
		for _, err := range validation.ValidateCustomResourceDefinition(context.Background(), &internal) {
			t.Errorf("%s: %v", kind, err)
		}
	}
}

// TestFixturesCoverEverySchemaField proves both directions without an apiserver: every field the
// Go types emit is in the schema, and every schema field is set by the round-trip fixtures (so
// TestRoundTripEveryKind really sends everything).
func TestFixturesCoverEverySchemaField(t *testing.T) {
	byKind := mustCRDs(t)
	for _, f := range fullFixtures("fixtures") {
		t.Run(f.kind, func(t *testing.T) {
			u, err := crds.ToUnstructured(f.obj)
			if err != nil {
				t.Fatal(err)
			}
			u.Object["status"] = mustToMap(t, f.status(1))
			var sent []string
			collectLeaves("", map[string]any{"spec": u.Object["spec"], "status": u.Object["status"]}, &sent)
			var declared []string
			walkSchema("", rootSchema(byKind[f.kind]), func(path string, s apiextensionsv1.JSONSchemaProps) {
				isLeaf := len(s.Properties) == 0 && (s.Items == nil || len(s.Items.Schema.Properties) == 0)
				if isLeaf && (strings.HasPrefix(path, "spec.") || strings.HasPrefix(path, "status.")) && !strings.HasSuffix(path, "[]") {
					declared = append(declared, path)
				}
			})
			sort.Strings(declared)
			if diff := cmp.Diff(declared, sent); diff != "" {
				t.Errorf("schema fields (-) vs fields the Go fixture sets (+):\n%s", diff)
			}
		})
	}
}

func mustToMap(tb testing.TB, v any) map[string]any {
	tb.Helper()
	u, err := crds.ToUnstructured(v)
	if err != nil {
		tb.Fatal(err)
	}
	return u.Object
}

// collectLeaves appends the sorted, de-duplicated leaf paths of an unstructured value; a list of
// scalars is one leaf, a list of maps is walked as "path[]".
func collectLeaves(path string, v any, out *[]string) {
	seen := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if strings.HasSuffix(path, ".matchLabels") { // a map of labels: one field of the schema
				break
			}
			for k, child := range v {
				walk(strings.TrimPrefix(path+"."+k, "."), child)
			}
			return
		case []any:
			if len(v) > 0 {
				if _, ok := v[0].(map[string]any); ok {
					for _, item := range v {
						walk(path+"[]", item)
					}
					return
				}
			}
		}
		seen[path] = true
	}
	walk(path, v)
	for p := range seen {
		*out = append(*out, p)
	}
	sort.Strings(*out)
}

// TestEnumsMatchTheGoConstants: the types a Receiver and a generated receiver accept are
// crds.ReceiverTypes, the kinds it reconciles are GitDestination and GitRepoConfig, the
// outcomes are the Outcome constants, the signing formats are crds.SigningFormats, the
// reasons of GitDestination status.skipped are crds.SkipReasons, and the attribution states of a
// RemoteCluster are the Attribution constants.
func TestEnumsMatchTheGoConstants(t *testing.T) {
	byKind := mustCRDs(t)
	spec := func(kind string) apiextensionsv1.JSONSchemaProps { return rootSchema(byKind[kind]).Properties["spec"] }
	enum := func(s apiextensionsv1.JSONSchemaProps) []string {
		var out []string
		for _, v := range s.Enum {
			out = append(out, strings.Trim(string(v.Raw), `"`))
		}
		return out
	}
	cases := []struct {
		name string
		got  []string
		want []string
	}{
		{"Receiver spec.type", enum(spec(crds.KindReceiver).Properties["type"]), crds.ReceiverTypes},
		{"NotifyChannel spec.type", enum(spec(crds.KindNotifyChannel).Properties["type"]), crds.ChannelTypes},
		{"NotifyChannel spec.provider", enum(spec(crds.KindNotifyChannel).Properties["provider"]), []string{crds.ProviderGitea, crds.ProviderGitHub, crds.ProviderGitLab}},
		{"NotifyRule spec.severity", enum(spec(crds.KindNotifyRule).Properties["severity"]), []string{crds.SeverityInfo, crds.SeverityError}},
		{"GitRepoConfig spec.receiver.type", enum(spec(crds.KindGitRepoConfig).Properties["receiver"].Properties["type"]), crds.ReceiverTypes},
		{"GitRepoConfig spec.commitSigning.format", enum(spec(crds.KindGitRepoConfig).Properties["commitSigning"].Properties["format"]), crds.SigningFormats},
		{"GitRepoConfig status.signingKey.format", enum(rootSchema(byKind[crds.KindGitRepoConfig]).Properties["status"].Properties["signingKey"].Properties["format"]),
			crds.SigningFormats},
		{"Receiver spec.resources[].kind", enum(spec(crds.KindReceiver).Properties["resources"].Items.Schema.Properties["kind"]),
			[]string{crds.KindGitDestination, crds.KindGitRepoConfig}},
		{"Receiver status.lastOutcome", enum(rootSchema(byKind[crds.KindReceiver]).Properties["status"].Properties["lastOutcome"]),
			[]string{crds.OutcomeTriggered, crds.OutcomeRefused, crds.OutcomeFiltered}},
		{"GitDestination status.skipped[].reason", enum(rootSchema(byKind[crds.KindGitDestination]).Properties["status"].Properties["skipped"].Items.Schema.Properties["reason"]),
			crds.SkipReasons},
		{"RemoteCluster status.attribution", enum(rootSchema(byKind[crds.KindRemoteCluster]).Properties["status"].Properties["attribution"]),
			[]string{crds.AttributionOff, crds.AttributionRegistered, crds.AttributionWorking, crds.AttributionFailing}},
	}
	for _, tc := range cases {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: enum %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
