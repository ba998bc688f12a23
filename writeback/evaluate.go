package writeback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitedits"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// ReasonNotSelected refuses a file of a resource the destination's rules do not select, or
// outside the namespace of the WatchRule that selects it.
const ReasonNotSelected = "NotSelected"

// candidate is a difference between a Git file and the live object: a proposal to be.
type candidate struct {
	edit    gitedits.Edit
	change  crds.ProposalChange
	target  crds.ProposalTarget
	desired []byte // the file as in Git, or in an adopted folder the document; nil for destroy
	// object names the target in an adopted folder, where one file holds several objects, so
	// that each has its own proposal; "" in a canonical folder, where the path names it.
	object     string
	liveRV     string
	liveDigest string
	diff       string
}

// evaluate compares one edited file with the live object in cl, the destination's cluster. It
// returns nil when they agree, a *Refused error for a file write-back will not act on, or another
// error when the cluster could not be read.
func (c *Controller) evaluate(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit) (*candidate, error) {
	if e.Deleted {
		return c.evaluateDeleted(ctx, d, cl, sels, e)
	}
	obj, gvr, err := admit(d, sels, e)
	if err != nil {
		return nil, err
	}
	live, err := cl.get(ctx, gvr, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return nil, err
	}
	desired := sanitize.Object(obj.Object)
	cand := &candidate{
		edit: e, desired: e.Content,
		target: crds.ProposalTarget{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Resource: gvr.Resource,
			Namespace: obj.GetNamespace(), Name: obj.GetName()},
	}
	desiredYAML, err := sanitize.YAML(desired)
	if err != nil {
		return nil, &Refused{Reason: ReasonUnparseable, Message: err.Error()}
	}
	if live == nil {
		cand.change = crds.ChangeCreate
		cand.diff = UnifiedDiff(nil, desiredYAML, "live (absent)", e.Path)
		return cand, nil
	}
	liveClean := sanitize.Object(live.Object)
	if reflect.DeepEqual(desired, liveClean) {
		return nil, nil
	}
	liveYAML, err := sanitize.YAML(liveClean)
	if err != nil {
		return nil, fmt.Errorf("render the live object: %w", err)
	}
	cand.change = crds.ChangeUpdate
	cand.liveRV, cand.liveDigest = live.GetResourceVersion(), digest(liveYAML)
	cand.diff = UnifiedDiff(liveYAML, desiredYAML, "live", e.Path)
	return cand, nil
}

// admit reads an edited file as the object write-back may act on, and its resource: a *Refused
// error for a link, a file too large or unparseable, a Secret, or an object at a path that is not
// its own or that the destination's rules do not select.
func admit(d *dest, sels []Selection, e gitedits.Edit) (*unstructured.Unstructured, schema.GroupVersionResource, error) {
	var none schema.GroupVersionResource
	if e.Link {
		return nil, none, &Refused{Reason: ReasonNotAFile, Message: "a symbolic link or a submodule, not a file: only files are read"}
	}
	if e.Size > MaxDocumentBytes || e.Content == nil {
		return nil, none, &Refused{Reason: ReasonTooLarge, Message: fmt.Sprintf("%d bytes, over the %d-byte limit", e.Size, MaxDocumentBytes)}
	}
	doc, err := ParseDocument(e.Content)
	if err != nil {
		return nil, none, err
	}
	obj := doc.Object
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	if err != nil {
		return nil, none, &Refused{Reason: ReasonNotAnObject, Message: fmt.Sprintf("apiVersion %q: %v", obj.GetAPIVersion(), err)}
	}
	if gv.Group == "" && obj.GetKind() == "Secret" {
		return nil, none, &Refused{Reason: ReasonSecret, Message: "Secrets are never proposed nor applied from Git"}
	}
	resource := resourceOf(sels, gv.Group, obj.GetKind())
	if resource == "" {
		return nil, none, notSelected(d, gv.Group, obj.GetKind(), obj.GetNamespace())
	}
	if _, err := CheckPath(d.folder, e.Path, obj, resource); err != nil {
		return nil, none, err
	}
	sel := selectKind(sels, gv.Group, obj.GetKind(), obj.GetNamespace())
	if sel == nil {
		return nil, none, notSelected(d, gv.Group, obj.GetKind(), obj.GetNamespace())
	}
	if !sel.selectsLabels(obj) {
		return nil, none, labelsNotSelected(d, e.Path, "the file's")
	}
	return obj, gv.WithResource(resource), nil
}

// evaluateDeleted handles a file a person removed: a destroy of the live object, if any.
func (c *Controller) evaluateDeleted(ctx context.Context, d *dest, cl *cluster, sels []Selection, e gitedits.Edit) (*candidate, error) {
	at, err := PathTarget(d.folder, e.Path)
	if err != nil {
		return nil, err
	}
	sel := selectResource(sels, at.Group, at.Resource, at.Namespace)
	if sel == nil {
		return nil, notSelected(d, at.Group, at.Resource, at.Namespace)
	}
	live, err := cl.get(ctx, sel.GVR, at.Namespace, at.Name)
	if err != nil || live == nil {
		return nil, err
	}
	if !sel.selectsLabels(live) {
		return nil, labelsNotSelected(d, e.Path, "the live object's")
	}
	liveYAML, err := sanitize.YAML(sanitize.Object(live.Object))
	if err != nil {
		return nil, fmt.Errorf("render the live object: %w", err)
	}
	return &candidate{
		edit: e, change: crds.ChangeDestroy,
		target: crds.ProposalTarget{APIVersion: sel.GVR.GroupVersion().String(), Kind: sel.Kind, Resource: sel.GVR.Resource,
			Namespace: at.Namespace, Name: at.Name},
		liveRV: live.GetResourceVersion(), liveDigest: digest(liveYAML),
		diff: UnifiedDiff(liveYAML, nil, "live", e.Path+" (deleted)"),
	}, nil
}

// get reads a live object of the cluster; nil when it does not exist. A RemoteCluster's object is
// read by a list of its one name: its kubeconfig's identity is granted what mirroring needs there,
// list and watch, and no more is asked of it to read.
func (cl *cluster) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	client := cl.dyn.Resource(gvr).Namespace(namespace)
	var obj *unstructured.Unstructured
	var err error
	if cl.remote() {
		obj, err = getByList(ctx, client, name)
	} else {
		obj, err = client.Get(ctx, name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s %s/%s%s: %w", gvr.Resource, namespace, name, cl.where(), err)
	}
	return obj, nil
}

// getByList reads the object name by a list of that one name: nil when there is none.
func getByList(ctx context.Context, client dynamic.ResourceInterface, name string) (*unstructured.Unstructured, error) {
	list, err := client.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].GetName() == name {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// Selection is one resource a destination's rules select, as write-back needs it (the watch
// says which): a Git file of any other resource, or outside the rule's namespace, is refused.
type Selection struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Namespace  string // "" = every namespace (a ClusterWatchRule), or a cluster-scoped resource
	// InNamespace, when set, says whether the selection covers a namespace by its labels (a
	// ClusterWatchRule's namespaceSelector); nil covers every one.
	InNamespace func(namespace string) bool
	// Labels, when set, says whether the rules' label selectors select an object of a namespace
	// with these labels; nil selects every one.
	Labels func(namespace string, labels map[string]string) bool
	// Writers are the rules that make this selection, with the ServiceAccount each writes back as.
	Writers []Writer
}

// selectsLabels reports whether the selection's label selectors select obj.
func (s *Selection) selectsLabels(obj *unstructured.Unstructured) bool {
	return s.Labels == nil || s.Labels(obj.GetNamespace(), obj.GetLabels())
}

// selectKind finds the selection of a kind in a namespace ("" for cluster-scoped objects).
func selectKind(sels []Selection, group, kind, namespace string) *Selection {
	for i := range sels {
		s := &sels[i]
		if s.GVR.Group == group && s.Kind == kind && inScope(s, namespace) {
			return s
		}
	}
	return nil
}

// resourceOf is the resource name of a selected kind, in any namespace; "" when not selected.
func resourceOf(sels []Selection, group, kind string) string {
	for _, s := range sels {
		if s.GVR.Group == group && s.Kind == kind {
			return s.GVR.Resource
		}
	}
	return ""
}

func selectResource(sels []Selection, group, resource, namespace string) *Selection {
	for i := range sels {
		s := &sels[i]
		if s.GVR.Group == group && s.GVR.Resource == resource && inScope(s, namespace) {
			return s
		}
	}
	return nil
}

// inScope reports whether an object in namespace is within the selection: a namespaced one in
// the rule's namespace (or any, for a ClusterWatchRule), a cluster-scoped one only without one.
func inScope(s *Selection, namespace string) bool {
	if !s.Namespaced {
		return namespace == ""
	}
	return namespace != "" && (s.Namespace == "" || s.Namespace == namespace) && (s.InNamespace == nil || s.InNamespace(namespace))
}

func notSelected(d *dest, group, kind, namespace string) *Refused {
	what := kind
	if group != "" {
		what = kind + "." + group
	}
	where := "cluster-scoped"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	return &Refused{Reason: ReasonNotSelected, Message: fmt.Sprintf("%s %s is not selected by the rules of GitDestination %s", what, where, d.key)}
}

// labelsNotSelected refuses a file whose object the destination's label selectors leave out.
func labelsNotSelected(d *dest, path, whose string) *Refused {
	return &Refused{Reason: ReasonNotSelected, Message: fmt.Sprintf("%s: %s labels are not selected by the rules of GitDestination %s (objectSelector, namespaceSelector)", path, whose, d.key)}
}

// digest names the sanitized live content a proposal was computed against.
func digest(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}
