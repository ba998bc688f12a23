package watch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// adoptedTarget is how a destination of layout Existing writes: into the team's own documents,
// with only what people changed (DESIGN.md §11).
type adoptedTarget struct {
	folder   string // the destination's baseFolder
	overlay  string // the folder of the kustomization it renders: folder, or its spec.existing.kustomization
	newFiles string // the template of a new object's file, inside folder; "" = none
	prune    bool
}

// documents reads the document that holds an object of an adopted folder (gitops.Worker.Document).
type documents interface {
	Document(ctx context.Context, folder, overlay string, k placement.Key) ([]byte, error)
}

// baselines caches, by the document's own text and namespace, the document's object as the
// apiserver defaults it: a document changes far less often than its object, so a live change
// costs no dry run, and an edit of one document of a file costs its neighbours none either.
// Bounded: past maxBaselines it starts over. It is its watcher's, used from its goroutine only.
type baselines struct {
	byDoc   map[string]map[string]any
	refused bool // a dry run was refused (no right to create): the file itself is the baseline
}

const maxBaselines = 4096

func (b *baselines) get(version string) (map[string]any, bool) {
	v, ok := b.byDoc[version]
	return v, ok
}

func (b *baselines) put(version string, obj map[string]any) {
	if b.byDoc == nil || len(b.byDoc) >= maxBaselines {
		b.byDoc = map[string]map[string]any{}
	}
	b.byDoc[version] = obj
}

// objectKey is obj's placement key: its group (no version), kind, namespace and name.
func (w *watcher) objectKey(obj *unstructured.Unstructured) placement.Key {
	return placement.Key{Group: w.sel.GVR.Group, Kind: w.sel.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// toAdopted hands target t the change of e's object as an edit of the document that holds it:
// what people changed against the file, or, for an object no file holds, its document made of
// what people set. Nothing is sent when nobody changed anything the file should say.
func (w *watcher) toAdopted(ctx context.Context, t target, e *event, credit gitops.Credit, canonical string) error {
	send := func(a *gitops.Adoption) error {
		if a == nil {
			return nil
		}
		return t.sink.Enqueue(gitops.Change{Path: canonical, Credit: credit, Summary: e.op.verb + " " + w.describe(e.obj), Adopt: a})
	}
	if isSecrets(w.sel) {
		return send(w.sealedAdoption(t, e))
	}
	docs, ok := t.sink.(documents)
	if !ok {
		return nil // a stopped worker
	}
	a := &gitops.Adoption{Folder: t.adopted.folder, Overlay: t.adopted.overlay, Key: w.objectKey(e.obj)}
	doc, err := docs.Document(ctx, t.adopted.folder, t.adopted.overlay, a.Key)
	switch {
	case errors.Is(err, gitops.ErrStopped):
		return err
	case err != nil: // the worker says why in the folder's status
		a.Unwritten = err.Error()
		return send(a)
	case doc == nil:
		if release := releaseOf(e.obj); release != "" {
			a.Unwritten = fmt.Sprintf("rendered by %s: a live change to what a chart rendered is not translated into the release's values; change them in the release (docs/layouts.md, \"Helm\")", release)
			return send(a)
		}
		return send(w.newAdoption(ctx, t, e, a))
	}
	return send(w.editAdoption(ctx, e, a, doc))
}

// owners are the field managers of e's object.
func owners(e *event) placement.Owners {
	meta, _ := e.obj.Object["metadata"].(map[string]any)
	managed, _ := meta["managedFields"].([]any)
	return placement.OwnersOf(managed, placement.DefaultPerson)
}

// newAdoption is a, the change of an object no document holds: its document of what people set.
func (w *watcher) newAdoption(ctx context.Context, t target, e *event, a *gitops.Adoption) *gitops.Adoption {
	var err error
	if a.New, err = placement.Render(w.intentOf(ctx, e.clean, owners(e))); err != nil {
		w.log.Error("adopted folder: render a new object; not written", "object", w.describe(e.obj), "err", err)
		return nil
	}
	a.Place = expandNewFile(t, w.sel.GVR.Resource, a.Key)
	return a
}

// editAdoption is a, the change of the object doc holds: what people changed against it; nil
// when they changed nothing the file says or should say.
func (w *watcher) editAdoption(ctx context.Context, e *event, a *gitops.Adoption, doc []byte) *gitops.Adoption {
	file, err := documentObject(doc)
	if err != nil {
		a.Unwritten = fmt.Sprintf("its document does not read: %v", err)
		return a
	}
	o := owners(e)
	ops, known := placement.WithoutBaseline(file, e.clean, o) // nothing, or values of a GitOps applier's object
	if !known {
		ops = placement.Changes(file, w.baseline(ctx, doc, file, e.obj.GetNamespace()), e.clean, o)
	}
	if a.Ops = ops; len(ops) == 0 {
		return nil
	}
	return a
}

// sealedAdoption is the change of a Secret: its document whole, encrypted for the destination's
// recipients. A Secret is never edited field by field (its file holds no plaintext to edit), and
// never encrypted for recipients a file names (anyone who can push could name their own).
func (w *watcher) sealedAdoption(t target, e *event) *gitops.Adoption {
	sealed, keep, err := seal(w.sealer, w.sel, t.recipients, e.content)
	if err != nil {
		w.log.Error("seal object; skipped", "object", w.describe(e.obj), "destination", t.destination, "err", err)
		return nil
	}
	k := w.objectKey(e.obj)
	return &gitops.Adoption{Folder: t.adopted.folder, Key: k, Whole: sealed, Keep: keep, Place: expandNewFile(t, w.sel.GVR.Resource, k)}
}

// documentObject reads one document as the object it holds.
func documentObject(doc []byte) (map[string]any, error) {
	nodes, err := sanitize.Documents(doc)
	if err != nil {
		return nil, err
	}
	if len(nodes) != 1 {
		return nil, fmt.Errorf("expected one document, found %d", len(nodes))
	}
	return sanitize.ObjectOf(nodes[0])
}

// baseline is the file's object as the apiserver defaults it, sanitized: a server-side dry run
// of creating it (under a generated name, as its own name is taken), cached by the document's
// text. When the daemon may not create the kind (a dry run needs the create verb), the file's
// own object is the baseline: field managers alone then tell people's changes from defaults.
func (w *watcher) baseline(ctx context.Context, doc []byte, file map[string]any, namespace string) map[string]any {
	sum := sha256.Sum256(append([]byte(namespace+"\x00"), doc...))
	version := string(sum[:])
	if b, ok := w.adopted.get(version); ok {
		return b
	}
	b := w.dryRun(ctx, file, namespace)
	w.adopted.put(version, b)
	return b
}

func (w *watcher) dryRun(ctx context.Context, file map[string]any, namespace string) map[string]any {
	if w.dyn == nil || w.adopted.refused {
		return file
	}
	out, err := w.dryRunCreate(ctx, file, namespace)
	if err != nil {
		if apierrors.IsForbidden(err) {
			w.adopted.refused = true
			w.log.Warn("adopted folder: the daemon may not dry-run creating this kind; field managers alone tell people's changes from defaults", "err", err)
		} else {
			w.log.Warn("adopted folder: dry run of a document failed; the file is its own baseline", "err", err)
		}
		return file
	}
	return out
}

// dryRunCreate is obj as the apiserver would create it, sanitized: a server-side dry run under
// a generated name (its own is taken), which persists nothing; the name is put back.
func (w *watcher) dryRunCreate(ctx context.Context, obj map[string]any, namespace string) (map[string]any, error) {
	u := &unstructured.Unstructured{Object: sanitize.Object(obj)}
	name := u.GetName()
	u.SetName("")
	u.SetGenerateName(dryRunPrefix(name))
	var client dynamic.ResourceInterface = w.dyn
	if w.sel.Namespaced {
		u.SetNamespace(namespace) // the live object's: a file may leave it to a kustomization
		client = w.dyn.Namespace(namespace)
	}
	out, err := client.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	out.SetName(name)
	out.SetGenerateName("")
	return sanitize.Object(out.Object), nil
}

// dryRunPrefix is the generateName of a dry run: the object's own name, cut to leave room for
// the suffix the apiserver adds.
func dryRunPrefix(name string) string {
	const maxPrefix = 52
	if len(name) > maxPrefix {
		name = name[:maxPrefix]
	}
	return strings.TrimRight(name, "-.") + "-"
}

// expandNewFile is t's template for a new object's file, expanded for k; "" when t has none.
func expandNewFile(t target, resource string, k placement.Key) string {
	if t.adopted.newFiles == "" {
		return ""
	}
	ns := k.Namespace
	if ns == "" {
		ns = "_cluster"
	}
	p := strings.NewReplacer("{namespace}", ns, "{kind}", strings.ToLower(k.Kind), "{group}", k.Group,
		"{resource}", resource, "{name}", k.Name).Replace(t.adopted.newFiles)
	if t.adopted.folder != "" {
		p = t.adopted.folder + "/" + p
	}
	return p
}

// adoptedOf is how destination d writes when it adopted its folder; nil for a canonical one.
func adoptedOf(d *crds.GitDestination) *adoptedTarget {
	if !d.Adopted() {
		return nil
	}
	t := &adoptedTarget{folder: d.Spec.BaseFolder, overlay: d.OverlayFolder()}
	if e := d.Spec.Existing; e != nil {
		t.newFiles, t.prune = e.NewFiles, e.Prune
	}
	return t
}

// String is the target's part of its watcher's signature: a changed setting restarts the watcher.
func (t *adoptedTarget) String() string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf("adopted:%s:%s:%t:%s", t.folder, t.newFiles, t.prune, t.overlay)
}
