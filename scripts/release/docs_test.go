package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/testenv"
)

// The pages that tell people how to verify a release, relative to this package.
var verifyingDocs = []string{
	"../../docs/release.md",
	"../../docs/image.md",
	"../../README.md",
	"../../deploy/helm/gitops-reverser/README.md",
}

// The Kyverno whose ClusterPolicy CRD the documented policy must pass: a current release, whose
// module (from the Go module proxy) holds the CRDs as Kyverno installs them.
const (
	kyvernoModule   = "github.com/kyverno/kyverno"
	kyvernoVersion  = "v1.19.1"
	kyvernoCRDFile  = "config/crds/kyverno/kyverno.io_clusterpolicies.yaml"
	imagePolicyPage = "../../docs/image.md"
)

// TestDocsCosignCommandsUseRealFlags runs cosign <subcommand> --help of the pinned cosigns, 2 and
// 3, for every cosign command of the verifying pages: every flag they give exists in both, and
// every command that verifies names the key and skips the transparency log, which releases are
// not in.
func TestDocsCosignCommandsUseRealFlags(t *testing.T) {
	var n int
	for _, page := range verifyingDocs {
		for _, c := range cosignCommands(readDoc(t, page)) {
			n++
			fields := strings.Fields(c)
			if strings.HasPrefix(fields[1], "verify") && (!slices.Contains(fields, "--key") || !slices.Contains(fields, "--insecure-ignore-tlog")) {
				t.Errorf("%s: a verification without --key and --insecure-ignore-tlog: %s", page, c)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d cosign commands in %v, want the documented ones", n, verifyingDocs)
	}
	for _, cosign := range everyCosign(t) {
		t.Run("cosign "+cosign.version, func(t *testing.T) {
			known := map[string][]string{}
			for _, page := range verifyingDocs {
				for _, c := range cosignCommands(readDoc(t, page)) {
					fields := strings.Fields(c)
					sub := fields[1]
					if known[sub] == nil {
						known[sub] = cosignFlags(t, cosign.bin, sub)
					}
					for i, f := range fields[2:] {
						name, _, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
						if strings.HasPrefix(f, "--") && !slices.Contains(known[sub], name) && !cosignAccepts(t, cosign.bin, sub, fields[2+i:]) {
							t.Errorf("%s: cosign %s has no flag --%s: %s", page, sub, name, c)
						}
					}
				}
			}
		})
	}
}

// TestDocsHaveTheBuildTypeSection: the provenance's buildType points at a heading of
// docs/release.md, which says what its fields mean.
func TestDocsHaveTheBuildTypeSection(t *testing.T) {
	page, anchor, ok := strings.Cut(buildType, "#")
	if !ok || page != defaultSource+"/blob/main/docs/release.md" {
		t.Fatalf("the build type %s is not a heading of docs/release.md", buildType)
	}
	if !slices.Contains(headingAnchors(readDoc(t, "../../docs/release.md")), anchor) {
		t.Errorf("docs/release.md has no heading #%s, which the provenance's buildType names", anchor)
	}
}

// TestDocsKyvernoPolicyMatchesTheRelease reads the ClusterPolicy of docs/image.md: it checks
// the images publish pushes (by tag and by digest) and nothing else, with the release key and no
// transparency log, and requires the SLSA provenance release attests, with Equals conditions.
func TestDocsKyvernoPolicyMatchesTheRelease(t *testing.T) {
	vi := documentedImageCheck(t)
	r := &releaseResult{Image: releaseObject{Repository: defaultRepository},
		Chart: releaseObject{Repository: chartRepository(defaultRepository, "gitops-reverser")}}
	dst, err := destinationFor(r, "ghcr.io/configbutler")
	if err != nil {
		t.Fatal(err)
	}
	digest := "@sha256:" + strings.Repeat("ab", 32)
	for _, image := range []string{defaultRepository + ":1.2.3", defaultRepository + digest, dst.Image + digest} {
		if !slices.ContainsFunc(vi.ImageReferences, func(p string) bool { return wildcardMatch(p, image) }) {
			t.Errorf("imageReferences %v do not match %s", vi.ImageReferences, image)
		}
	}
	if other := "ghcr.io/configbutler/other:1.2.3"; slices.ContainsFunc(vi.ImageReferences, func(p string) bool { return wildcardMatch(p, other) }) {
		t.Errorf("imageReferences %v match %s too", vi.ImageReferences, other)
	}
	checkKeyAttestors(t, "verifyImages", vi.Attestors)
	if len(vi.Attestations) != 1 || vi.Attestations[0].Type != slsaProvenanceType {
		t.Fatalf("attestations %+v, want one of type %s", vi.Attestations, slsaProvenanceType)
	}
	checkKeyAttestors(t, "the attestation", vi.Attestations[0].Attestors)
	if conds := policyConditions(vi); len(conds) == 0 {
		t.Error("the attestation has no conditions")
	}
}

// TestDocsKyvernoConditionsHoldOnTheProvenance evaluates every condition of the documented
// policy on the predicate of a real release's provenance, as Kyverno does: the predicate's fields
// are the variables, each key a dotted path in {{ }}, compared with Equals.
func TestDocsKyvernoConditionsHoldOnTheProvenance(t *testing.T) {
	vi := documentedImageCheck(t)
	rel := sharedRelease(t)
	var st struct {
		Predicate map[string]any `json:"predicate"`
	}
	if err := json.Unmarshal(provenanceOf(t, rel.out), &st); err != nil {
		t.Fatal(err)
	}
	for _, c := range policyConditions(vi) {
		path, ok := jmesPath(c.Key)
		if !ok || c.Operator != "Equals" {
			t.Errorf("condition %+v: want a key {{ a.b.c }} and the operator Equals", c)
			continue
		}
		got, found := lookup(st.Predicate, path)
		if !found || got != c.Value {
			t.Errorf("condition %s: the provenance says %v (found %v), the policy wants %v", c.Key, got, found, c.Value)
		}
	}
}

// TestDocsKyvernoPolicyIsAcceptedByItsCRD installs Kyverno's own ClusterPolicy CRD into a
// control plane and creates the documented policy with strict field validation: every field name
// is one Kyverno knows. The same policy with one field misspelt is refused, so the check bites.
func TestDocsKyvernoPolicyIsAcceptedByItsCRD(t *testing.T) {
	crd := kyvernoCRD(t)
	policy := documentedPolicy(t)
	ctx := context.Background()
	cp, err := testenv.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	cfg := rest.CopyConfig(cp.AdminConfig())
	cfg.WarningHandler = rest.NoWarnings{} // kyverno.io/v1 is deprecated in favour of ImageValidatingPolicy
	client := dynamic.NewForConfigOrDie(cfg)
	installCRD(ctx, t, client, crd)
	policies := client.Resource(schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"})
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	testenv.Eventually(t, time.Minute, "the policy is created", func() (bool, string) {
		_, err := policies.Create(ctx, policy.DeepCopy(), strict)
		return err == nil, errString(err)
	})
	misspelt := policy.DeepCopy()
	misspelt.SetName("misspelt")
	rules, _, _ := unstructured.NestedSlice(misspelt.Object, "spec", "rules")
	rules[0].(map[string]any)["verifyImages"].([]any)[0].(map[string]any)["ignoreTlog"] = true
	if err := unstructured.SetNestedSlice(misspelt.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	if _, err := policies.Create(ctx, misspelt, strict); err == nil || !strings.Contains(err.Error(), "ignoreTlog") {
		t.Errorf("a policy with ignoreTlog in the wrong place: %v, want a refusal naming it", err)
	}
}

// installCRD creates a CustomResourceDefinition and waits until it is established.
func installCRD(ctx context.Context, t *testing.T, client dynamic.Interface, crd *unstructured.Unstructured) {
	t.Helper()
	crds := client.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, crd.GetName()+" is established", func() (bool, string) {
		got, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, ""
			}
		}
		return false, "not established"
	})
}

// kyvernoCRD is Kyverno's ClusterPolicy CRD, from its module at kyvernoVersion.
func kyvernoCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", kyvernoModule+"@"+kyvernoVersion)
	cmd.Dir = t.TempDir() // outside this module, so its go.mod and go.sum stay as they are
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s", kyvernoModule, kyvernoVersion, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(mod.Dir, filepath.FromSlash(kyvernoCRDFile)))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
		t.Fatalf("%s: %v", kyvernoCRDFile, err)
	}
	return crd
}

// kyvernoImageCheck is the part of a Kyverno ClusterPolicy's verifyImages the test reads.
type kyvernoImageCheck struct {
	ImageReferences []string             `json:"imageReferences"`
	Attestors       []kyvernoAttestorSet `json:"attestors"`
	Attestations    []struct {
		Type       string               `json:"type"`
		Attestors  []kyvernoAttestorSet `json:"attestors"`
		Conditions []struct {
			All []kyvernoCondition `json:"all"`
			Any []kyvernoCondition `json:"any"`
		} `json:"conditions"`
	} `json:"attestations"`
}

// kyvernoAttestorSet is a set of attestors, of which the test reads static keys.
type kyvernoAttestorSet struct {
	Entries []struct {
		Keys *struct {
			PublicKeys string `json:"publicKeys"`
			Rekor      *struct {
				IgnoreTlog bool `json:"ignoreTlog"`
			} `json:"rekor"`
			CTLog *struct {
				IgnoreSCT bool `json:"ignoreSCT"`
			} `json:"ctlog"`
		} `json:"keys"`
	} `json:"entries"`
}

// kyvernoCondition is one condition on an attestation's predicate.
type kyvernoCondition struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    any    `json:"value"`
}

// documentedPolicy is the ClusterPolicy of docs/image.md.
func documentedPolicy(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var found []string
	for _, b := range codeBlocks(readDoc(t, imagePolicyPage)) {
		if strings.Contains(b, "kind: ClusterPolicy") {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s has %d ClusterPolicy blocks, want 1", imagePolicyPage, len(found))
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(found[0]), &u.Object); err != nil {
		t.Fatalf("%s: the ClusterPolicy: %v", imagePolicyPage, err)
	}
	if u.GetAPIVersion() != "kyverno.io/v1" {
		t.Fatalf("%s: the ClusterPolicy's apiVersion is %q", imagePolicyPage, u.GetAPIVersion())
	}
	return u
}

// documentedImageCheck is the one verifyImages entry of the documented policy.
func documentedImageCheck(t *testing.T) kyvernoImageCheck {
	t.Helper()
	var spec struct {
		Rules []struct {
			VerifyImages []kyvernoImageCheck `json:"verifyImages"`
		} `json:"rules"`
	}
	raw, err := json.Marshal(documentedPolicy(t).Object["spec"])
	if err == nil {
		err = json.Unmarshal(raw, &spec)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Rules) != 1 || len(spec.Rules[0].VerifyImages) != 1 {
		t.Fatalf("%s: want one rule with one verifyImages entry: %+v", imagePolicyPage, spec)
	}
	return spec.Rules[0].VerifyImages[0]
}

// checkKeyAttestors checks every attestor is a public key checked without a transparency log.
func checkKeyAttestors(t *testing.T, where string, sets []kyvernoAttestorSet) {
	t.Helper()
	if len(sets) == 0 {
		t.Errorf("%s: no attestors (Kyverno would accept any key)", where)
	}
	for _, s := range sets {
		for _, e := range s.Entries {
			k := e.Keys
			if k == nil || !strings.Contains(k.PublicKeys, "BEGIN PUBLIC KEY") || k.Rekor == nil || !k.Rekor.IgnoreTlog ||
				k.CTLog == nil || !k.CTLog.IgnoreSCT {
				t.Errorf("%s: an attestor that is not a public key with rekor.ignoreTlog and ctlog.ignoreSCT: %+v", where, k)
			}
		}
	}
}

// policyConditions are the conditions of every attestation, any or all.
func policyConditions(vi kyvernoImageCheck) []kyvernoCondition {
	var out []kyvernoCondition
	for _, a := range vi.Attestations {
		for _, c := range a.Conditions {
			out = append(append(out, c.All...), c.Any...)
		}
	}
	return out
}

// jmesKey is a condition's key: one dotted path of plain names in {{ }}.
var jmesKey = regexp.MustCompile(`^\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}$`)

// jmesPath is the names of a condition's key.
func jmesPath(key string) ([]string, bool) {
	m := jmesKey.FindStringSubmatch(key)
	if m == nil {
		return nil, false
	}
	return strings.Split(m[1], "."), true
}

// lookup is the value at path in a JSON object.
func lookup(v any, path []string) (any, bool) {
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// wildcardMatch is Kyverno's image reference match: * is any run of characters, ? any one.
func wildcardMatch(pattern, s string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(s)
}

// cosignCommands are the cosign command lines of a page's code blocks, continuation lines joined,
// without what a shell does with their output (a pipe, a redirection).
func cosignCommands(md string) []string {
	var out []string
	for _, b := range codeBlocks(md) {
		for _, line := range strings.Split(strings.ReplaceAll(b, "\\\n", " "), "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "cosign ") {
				continue
			}
			for _, end := range []string{" |", " 2>", " >", " &&", " #"} {
				line, _, _ = strings.Cut(line, end)
			}
			out = append(out, line)
		}
	}
	return out
}

// fence opens or closes a fenced code block.
var fence = regexp.MustCompile("^\\s*```")

// codeBlocks are the contents of a Markdown text's fenced code blocks.
func codeBlocks(md string) []string {
	var out []string
	var block *strings.Builder
	for _, line := range strings.Split(md, "\n") {
		switch {
		case fence.MatchString(line) && block == nil:
			block = &strings.Builder{}
		case fence.MatchString(line):
			out = append(out, block.String())
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		}
	}
	return out
}

// cosignFlag is a flag in cosign's help, e.g. "    --type='custom':" or "  -k, --key=...".
var cosignFlag = regexp.MustCompile(`(?m)^\s+(?:-[A-Za-z], )?--([a-z0-9-]+)=`)

// cosignFlags are the long flags cosign sub --help lists.
func cosignFlags(t *testing.T, cosign, sub string) []string {
	t.Helper()
	out, err := exec.Command(cosign, sub, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("cosign %s --help: %v\n%s", sub, err, out)
	}
	var flags []string
	for _, m := range cosignFlag.FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("cosign %s --help lists no flags:\n%s", sub, out)
	}
	return flags
}

// cosignAccepts says whether cosign sub takes the flag that starts args (with its value, the next
// argument, when it has no =) though its help does not list it: a deprecated flag cosign hides
// but still honours (sign-blob's --tlog-upload, cosign 3's verify-blob --signature).
func cosignAccepts(t *testing.T, cosign, sub string, args []string) bool {
	t.Helper()
	flag := args[:1]
	if !strings.Contains(args[0], "=") && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		flag = args[:2]
	}
	out, err := exec.Command(cosign, slices.Concat([]string{sub}, flag, []string{"--help"})...).CombinedOutput()
	if err != nil || strings.Contains(string(out), "unknown flag") {
		return false
	}
	t.Logf("cosign %s --help does not list %s, but cosign takes it (deprecated?)", sub, strings.Join(flag, " "))
	return true
}

// headingAnchors are the anchors GitHub gives a page's headings (outside code blocks): lower
// case, spaces as hyphens, other punctuation dropped.
func headingAnchors(md string) []string {
	var out []string
	inCode := false
	for _, line := range strings.Split(md, "\n") {
		if fence.MatchString(line) {
			inCode = !inCode
		}
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if inCode || !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
