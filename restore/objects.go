package restore

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/sanitize"
	"github.com/configbutler/gitops-reverser/sops"
)

// item is one object of the source and what became of it.
type item struct {
	Result
	obj        *unstructured.Unstructured // nil when the file held no object to restore
	gvr        schema.GroupVersionResource
	namespaced bool
	wave       int
	// live is the object in the cluster, nil when absent, once listed says it was read by a list
	// (listLive); else apply reads it.
	live   *unstructured.Unstructured
	listed bool
	// locked says obj is still encrypted (SOPS) for want of the age key: it can be left out, not
	// restored.
	locked bool
}

// parse reads the objects of files: one a document, SOPS documents decrypted with identities.
// Without identities an encrypted document is read as it is (its metadata is plain), so that
// choose can tell the daemon's own Secrets, left out, from those skipped for want of the key. A
// file that is not an object (the .sops.yaml beside them, a README in YAML) is no item; one that
// does not parse fails with the reason.
func parse(files []file, identities []string) []item {
	var items []item
	for _, f := range files {
		data := f.data
		encrypted := sops.IsEncrypted(data)
		if encrypted && len(identities) > 0 {
			plain, err := sops.Decrypt(data, identities)
			if err != nil {
				items = append(items, failedFile(f.path, data, fmt.Sprintf("decrypt: %v", err)))
				continue
			}
			data = plain
		}
		objs, err := decode(data)
		if err != nil {
			items = append(items, failedFile(f.path, data, fmt.Sprintf("not YAML a Kubernetes object can be read from: %v", err)))
			continue
		}
		for _, obj := range objs {
			if encrypted { // the mirror's record of the plaintext, not the Secret's
				unstructured.RemoveNestedField(obj.Object, "metadata", "annotations", sops.DigestAnnotation)
				if len(obj.GetAnnotations()) == 0 {
					unstructured.RemoveNestedField(obj.Object, "metadata", "annotations")
				}
			}
			it := item{obj: obj, locked: encrypted && len(identities) == 0,
				Result: Result{Path: f.path, Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}}
			if obj.GetAPIVersion() == "" || obj.GetName() == "" {
				it.Outcome, it.Reason, it.obj = Skipped, "no apiVersion or metadata.name: not a Kubernetes object", nil
			}
			items = append(items, it)
		}
	}
	return items
}

// reasonLocked is why an encrypted Secret is skipped without the age key.
const reasonLocked = "encrypted (SOPS): give the age key in SOPS_AGE_KEY_FILE or SOPS_AGE_KEY"

// decode reads every YAML document of data that has a kind, exactly as the mirror wrote it
// (sanitize.ObjectOf: integers stay whole, strings keep every character); documents without one
// (the .sops.yaml's creation rules) are not objects. An error names the line or field and says
// what to write instead.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := sanitize.Documents(data)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		m, err := sanitize.ObjectOf(doc)
		if err != nil {
			return nil, err
		}
		if kind, _ := m["kind"].(string); kind != "" {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs, nil
}

// failedFile is the item of a file whose object could not be read; data, when given, names the
// object if its fields can be read.
func failedFile(path string, data []byte, reason string) item {
	it := item{Result: Result{Path: path, Outcome: Failed, Reason: reason}}
	var head struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name      string `yaml:"name"`
			Namespace string `yaml:"namespace"`
		} `yaml:"metadata"`
	}
	if data != nil && yaml.Unmarshal(data, &head) == nil {
		it.Kind, it.Namespace, it.Name = head.Kind, head.Metadata.Namespace, head.Metadata.Name
	}
	return it
}

// leftOutByDefault says why obj is not restored unless asked for: the apiserver makes and keeps
// it itself (restored, it would fight the new cluster's own), or it is the daemon's own
// configuration (restored as it is, a daemon in the new cluster would write into the old
// cluster's folder). "" restores it.
func leftOutByDefault(obj *unstructured.Unstructured, includeConfiguration bool) string {
	group, kind := obj.GroupVersionKind().Group, obj.GetKind()
	if !includeConfiguration && daemonsOwn(group, obj) {
		return reasonConfiguration
	}
	if apiserverMade(group, kind, obj) {
		return reasonAPIServer
	}
	return ""
}

// daemonsOwn says whether obj is gitops-reverser's configuration or made by the daemon for itself:
// the configbutler.ai objects, what it labels as managed by it, and its admission webhook and
// policies (the daemon in the new cluster registers its own).
func daemonsOwn(group string, obj *unstructured.Unstructured) bool {
	return group == crds.Group || obj.GetLabels()[crds.LabelManagedBy] == crds.ManagedByDaemon ||
		group == "admissionregistration.k8s.io" && strings.HasPrefix(obj.GetName(), "gitops-reverser")
}

// The reasons objects are left out by default.
const (
	reasonConfiguration = "gitops-reverser's own configuration and what the daemon makes for itself (--include-configuration brings them in)"
	reasonAPIServer     = "made and kept by the apiserver"
)

// apiserverMade says whether the apiserver (or the controllers every cluster runs) makes obj for
// itself: the suggested and mandatory API priority and fairness objects it keeps updated, the
// Service IP allocations, the default ServiceCIDR, the kubernetes Service and its Endpoints, the
// root CA ConfigMap of each namespace and the apiserver's own ConfigMaps in kube-system, the RBAC and PriorityClasses it bootstraps, and the
// APIServices of its built-in groups. docs/restore.md lists them.
func apiserverMade(group, kind string, obj *unstructured.Unstructured) bool {
	name, ns := obj.GetName(), obj.GetNamespace()
	switch group + "/" + kind {
	case "flowcontrol.apiserver.k8s.io/FlowSchema", "flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration":
		return obj.GetAnnotations()["apf.kubernetes.io/autoupdate-spec"] == "true"
	case "networking.k8s.io/IPAddress":
		return true
	case "networking.k8s.io/ServiceCIDR":
		return name == "kubernetes"
	case "/ConfigMap":
		return name == "kube-root-ca.crt" || ns == "kube-system" &&
			(name == "extension-apiserver-authentication" || name == "kube-apiserver-legacy-service-account-token-tracking")
	case "/Service", "/Endpoints", "discovery.k8s.io/EndpointSlice":
		return ns == "default" && name == "kubernetes"
	case "rbac.authorization.k8s.io/ClusterRole", "rbac.authorization.k8s.io/ClusterRoleBinding",
		"rbac.authorization.k8s.io/Role", "rbac.authorization.k8s.io/RoleBinding":
		return obj.GetLabels()["kubernetes.io/bootstrapping"] == "rbac-defaults"
	case "scheduling.k8s.io/PriorityClass":
		return name == "system-cluster-critical" || name == "system-node-critical"
	case "apiregistration.k8s.io/APIService":
		return obj.GetLabels()["kube-aggregator.kubernetes.io/automanaged"] != ""
	}
	return false
}

// Selector picks objects by kind or namespace, for --only and --exclude: "kind=Deployment" (a
// kind, or kind.group as in "kind=Deployment.apps"; any case) or "namespace=team-a"
// ("namespace=" alone: cluster-scoped objects).
type Selector struct{ Kind, Group, Namespace string }

// byKind says whether s selects by kind, else by namespace.
func (s Selector) byKind() bool { return s.Kind != "" }

// ParseSelector reads "kind=KIND[.GROUP]" or "namespace=NAME".
func ParseSelector(s string) (Selector, error) {
	key, value, ok := strings.Cut(s, "=")
	switch {
	case !ok:
	case key == "kind" && value != "":
		kind, group, _ := strings.Cut(value, ".")
		return Selector{Kind: kind, Group: group}, nil
	case key == "namespace" || key == "ns":
		return Selector{Namespace: value}, nil
	}
	return Selector{}, fmt.Errorf("%q: a selector is kind=KIND (or KIND.GROUP) or namespace=NAME", s)
}

func (s Selector) matches(obj *unstructured.Unstructured) bool {
	if s.byKind() {
		gvk := obj.GroupVersionKind()
		return strings.EqualFold(s.Kind, gvk.Kind) && (s.Group == "" || strings.EqualFold(s.Group, gvk.Group))
	}
	return s.Namespace == obj.GetNamespace()
}

// selected says whether obj passes --only (of the kind selectors given, one matches; of the
// namespace selectors given, one matches) and --exclude (none matches).
func selected(obj *unstructured.Unstructured, only, exclude []Selector) bool {
	for _, s := range exclude {
		if s.matches(obj) {
			return false
		}
	}
	return anyMatch(only, obj, true) && anyMatch(only, obj, false)
}

// anyMatch says whether one of the selectors of sels that select by kind (byKind) or by
// namespace (!byKind) matches obj; true when there is none of that sort.
func anyMatch(sels []Selector, obj *unstructured.Unstructured, byKind bool) bool {
	some := false
	for _, s := range sels {
		if s.byKind() != byKind {
			continue
		}
		if s.matches(obj) {
			return true
		}
		some = true
	}
	return !some
}
