package watch

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/configbutler/gitops-reverser/controller"
	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/metrics"
	"github.com/configbutler/gitops-reverser/placement"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// Authors tells who made a change the watch saw; the admission webhook records them, write-back
// its applies. op is CREATE, UPDATE or DELETE and content the canonical JSON of the sanitized
// object (sanitize.JSON; nil for DELETE), which both sides compute the same way.
type Authors interface {
	Author(op string, gk schema.GroupKind, namespace, name string, content []byte) (gitops.Credit, bool)
}

// noAuthors credits every change to the bot: attribution is off.
type noAuthors struct{}

func (noAuthors) Author(string, schema.GroupKind, string, string, []byte) (gitops.Credit, bool) {
	return gitops.Credit{}, false
}

// target is one destination's interest in the objects a watcher sees.
type target struct {
	destination string // namespace/name of the GitDestination, for logs
	baseFolder  string
	ops         ops
	url, branch string      // the Git worker that writes it
	sink        gitops.Sink // that worker: never blocks, so one slow remote holds up no watch
	recipients  []string    // of a Secrets target: what every file is encrypted for
	filter      filter      // what the destination's rules leave out
	// namespaces names the namespaces the filter's namespaceSelectors select now, so a
	// namespace relabelled in or out restarts the watcher: its re-list writes and deletes.
	namespaces string
	// writers are the rules that select the resource for the destination: for write-back only,
	// so they are not part of the watcher's signature.
	writers []Writer
	// adopted is set for a destination of layout Existing: the folder is the team's own.
	adopted *adoptedTarget
}

// watcher lists and then watches one resource in one namespace ("" = all namespaces or a
// cluster-scoped resource) and turns every object into a file change for each target.
// It keeps no objects, only a content hash per object, so memory stays flat however big the
// objects are.
type watcher struct {
	sel      Selection
	targets  []target
	client   dynamic.ResourceInterface              // for a Get
	dyn      dynamic.NamespaceableResourceInterface // for the dry runs of adopted folders' documents
	adopted  baselines                              // what those dry runs gave, by document
	stream   collection                             // lists and watches
	authors  Authors
	sealer   Sealer // set for a Secrets watcher
	metrics  *metrics.Mirror
	recorder *controller.Events
	log      *slog.Logger
	skipped  *skipCounts
	seen     func() // told of every change a watch event delivers; nil for the daemon's own cluster

	selection watcherSelection
	seed      maphash.Seed
	hashes    map[uint64]uint64 // hash of namespace/name (see keyHash) → hash of the canonical YAML last sent
}

// listPageSize is the objects a list reads per request, as client-go's lists do. The page does
// not bound memory: its objects are decoded and written one at a time as they arrive.
const listPageSize = 500

var errGone = errors.New("resource version expired")

// run lists, then watches from the list's resourceVersion; a watch that ends resumes from the
// last resourceVersion seen, and an expired one (410 Gone) re-lists, which also finds the deletes
// the watch missed. Errors back off from 500 ms to 30 s.
func (w *watcher) run(ctx context.Context) {
	w.seed = maphash.MakeSeed()
	backoff := 500 * time.Millisecond
	rv := ""
	listed := false
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			if listed {
				w.metrics.Relists.Inc()
			}
			listed = true
			rv, err = w.list(ctx)
		} else {
			rv, err = w.watch(ctx, rv)
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errGone):
			w.log.Info("watch expired; re-listing")
			rv = ""
			continue
		case err != nil:
			w.log.Warn("list/watch failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = 500 * time.Millisecond
	}
}

// list reads every object page by page, writes each, then asks every target to delete the files
// of its scope that no listed object maps to.
func (w *watcher) list(ctx context.Context) (string, error) {
	live := make([]map[string]struct{}, len(w.targets))
	keys := make([]map[placement.Key]struct{}, len(w.targets)) // of adopted targets only
	for i, t := range w.targets {
		live[i] = map[string]struct{}{}
		if t.adopted != nil {
			keys[i] = map[placement.Key]struct{}{}
		}
	}
	hashes := map[uint64]uint64{}
	w.skipped.resetGenerated()
	w.forgetUnselected()
	opts := listOptions{limit: listPageSize, labelSelector: w.selection.labelSelector}
	for {
		rv, next, err := w.stream.list(ctx, opts, func(obj *unstructured.Unstructured) error {
			paths, h, err := w.write(ctx, obj, "", 0)
			if err != nil {
				return err
			}
			w.pace(ctx)
			hashes[w.keyHash(obj)] = h
			for t, p := range paths {
				if p != "" {
					live[t][p] = struct{}{}
					if keys[t] != nil {
						keys[t][w.objectKey(obj)] = struct{}{}
					}
				}
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("list %s: %w", w.sel.GVR, err)
		}
		if next == "" {
			w.hashes = hashes
			return rv, w.syncOrphans(live, keys)
		}
		opts.continueToken = next
	}
}

// paced is a sink that can hold up a list while its backlog is large (gitops.Worker.Pace).
type paced interface{ Pace(ctx context.Context) }

// pace waits for the sinks that keep a list from running far ahead of their commits: a list
// writes faster than a Git worker commits, and what waits for a commit is held in memory.
func (w *watcher) pace(ctx context.Context) {
	for _, t := range w.targets {
		if p, ok := t.sink.(paced); ok {
			p.Pace(ctx)
		}
	}
}

func (w *watcher) syncOrphans(live []map[string]struct{}, keys []map[placement.Key]struct{}) error {
	for i, t := range w.targets {
		if t.ops&opDelete == 0 {
			continue
		}
		s := gitops.Sync{Scopes: []string{scope(t.baseFolder, w.sel)}, Live: live[i]}
		if t.adopted != nil { // the team's files are never orphans: absent objects are listed
			s = gitops.Sync{Adopted: &gitops.AdoptedLive{Folder: t.adopted.folder, Group: w.sel.GVR.Group, Kind: w.sel.Kind,
				Namespace: w.sel.Namespace, Live: keys[i], Prune: t.adopted.prune}}
		}
		if err := t.sink.Sync(s); err != nil {
			return fmt.Errorf("sync %s for %s: %w", w.sel.GVR.Resource, t.destination, err)
		}
	}
	return nil
}

// watch follows changes from rv until the watch ends, and returns the last resourceVersion seen.
func (w *watcher) watch(ctx context.Context, rv string) (string, error) {
	timeout := time.Duration(300+rand.IntN(300)) * time.Second // spread re-watches of many resources over time
	// A watch the apiserver does not end in time (a connection gone quiet) is ended here.
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	stream, err := w.stream.watch(ctx, listOptions{resourceVersion: rv, timeout: timeout, labelSelector: w.selection.labelSelector})
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return "", errGone
	}
	if err != nil {
		return rv, fmt.Errorf("watch %s: %w", w.sel.GVR, err)
	}
	defer func() { _ = stream.Close() }()
	for {
		typ, obj, err := stream.next()
		switch {
		case errors.Is(err, io.EOF):
			return rv, nil
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			return "", errGone
		case err != nil:
			return rv, fmt.Errorf("watch %s: %w", w.sel.GVR, err)
		}
		rv = obj.GetResourceVersion()
		if err := w.handle(ctx, typ, obj); err != nil {
			return rv, err
		}
	}
}

func (w *watcher) handle(ctx context.Context, typ watch.EventType, obj *unstructured.Unstructured) error {
	kh := w.keyHash(obj)
	switch typ {
	case watch.Added, watch.Modified:
		opName := "UPDATE"
		if typ == watch.Added {
			opName = "CREATE"
		}
		_, h, err := w.write(ctx, obj, opName, w.hashes[kh])
		if err == nil {
			w.hashes[kh] = h
		}
		return err
	case watch.Deleted:
		w.metrics.ObjectsScanned.Inc()
		if w.seen != nil {
			w.seen()
		}
		delete(w.hashes, kh)
		k := key(obj)
		gen := generated(w.sel, obj)
		var credit gitops.Credit // asked once a target takes the delete, as in write
		asked := false
		for i, t := range w.targets {
			w.skipped.setGenerated(i, k, "")
			if w.leftOut(i, k) || t.ops&opDelete == 0 || gen != "" && !t.filter.keepGenerated { // never written
				continue
			}
			if !asked {
				credit, asked = w.deleteCredit(ctx, obj), true
			}
			c := gitops.Change{Path: w.path(t, obj), Credit: credit, Summary: "delete " + w.describe(obj)}
			if t.adopted != nil {
				c.Adopt = &gitops.Adoption{Folder: t.adopted.folder, Overlay: t.adopted.overlay, Key: w.objectKey(obj), Delete: true}
			}
			if err := t.sink.Enqueue(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// write sanitizes obj and hands its canonical YAML to every target whose operations include
// opName. A watch event (CREATE or UPDATE) is credited to whoever the webhook saw making it; a
// listed object (opName "", counted as either) to the bot. An object whose content hash equals
// skip (a status-only update) is not sent at all. It returns the path per target and the hash.
func (w *watcher) write(ctx context.Context, obj *unstructured.Unstructured, opName string, skip uint64) ([]string, uint64, error) {
	op := writeOps[opName]
	w.metrics.ObjectsScanned.Inc()
	if w.seen != nil && opName != "" {
		w.seen() // a change, not a listed object
	}
	paths := make([]string, len(w.targets))
	for i, t := range w.targets {
		paths[i] = w.path(t, obj)
	}
	// The canonical YAML is both the file and what tells a change from a status-only update.
	clean := sanitize.Object(obj.Object)
	content, fits, err := fileContent(clean)
	if err != nil {
		w.log.Error("render object; skipped", "object", w.describe(obj), "err", err)
		return paths, skip, nil // its file, if any, stays
	}
	h := maphash.Bytes(w.seed, content)
	if !fits && h != skip {
		w.tooLarge(obj, len(content))
		return paths, h, nil // its file, if any, stays as it was
	}
	e := &event{obj: obj, opName: opName, op: op, content: content, clean: clean, h: h, skip: skip, gen: generated(w.sel, obj),
		author: author{w: w, obj: obj, clean: clean, opName: opName, unchanged: h == skip}}
	for i, t := range w.targets {
		if err := w.toTarget(ctx, i, t, e, paths); err != nil {
			return nil, h, err
		}
	}
	return paths, h, nil
}

// event is one object write hands to its targets.
type event struct {
	obj     *unstructured.Unstructured
	opName  string
	op      writeOp
	content []byte
	clean   map[string]any // the sanitized object content was rendered from
	h, skip uint64
	gen     string // why the cluster generated it; "" when it did not
	author  author
}

// toTarget hands e to target i (t), or records why not; paths[i] becomes "" when the object is
// not live for it.
func (w *watcher) toTarget(ctx context.Context, i int, t target, e *event, paths []string) error {
	obj := e.obj
	if e.gen == "" || t.filter.keepGenerated {
		w.skipped.setGenerated(i, key(obj), "") // it may have lost its controller owner
	} else {
		// Never written, so not live either: a file of it from before is deleted as an orphan.
		paths[i] = ""
		w.skipped.setGenerated(i, key(obj), e.gen)
		if e.h != e.skip {
			w.metrics.ChangesSkipped.WithLabelValues(e.gen).Inc()
		}
		return nil
	}
	selected, left := w.selects(i, obj)
	left = left && e.opName != "" // a re-list leaves what it no longer selects to the orphan sync
	if !selected {
		paths[i] = "" // not live: a file of it from before is deleted as an orphan
	}
	if !left && (!selected || t.ops&e.op.bits == 0 || e.h == e.skip) {
		return nil
	}
	credit, user, managers := e.author.get()
	if why := t.filter.excludes(user, managers); why != "" {
		w.skipped.changeSkipped(i, why)
		w.metrics.ChangesSkipped.WithLabelValues(why).Inc()
		return nil
	}
	if left { // relabelled out of the selection: its file leaves Git as a delete would
		if t.ops&opDelete == 0 {
			return nil
		}
		c := gitops.Change{Path: w.path(t, obj), Credit: credit, Summary: "delete " + w.describe(obj) + " (no longer selected)"}
		if t.adopted != nil {
			c.Adopt = &gitops.Adoption{Folder: t.adopted.folder, Overlay: t.adopted.overlay, Key: w.objectKey(obj), Delete: true}
		}
		return t.sink.Enqueue(c)
	}
	if t.adopted != nil {
		return w.toAdopted(ctx, t, e, credit, paths[i])
	}
	c := gitops.Change{Path: paths[i], Credit: credit, Summary: e.op.verb + " " + w.describe(obj)}
	var err error
	if c.Content, c.Keep, err = seal(w.sealer, w.sel, t.recipients, e.content); err != nil {
		// The error never holds the plaintext; the file, if any, stays as it was.
		w.log.Error("seal object; skipped", "object", w.describe(obj), "destination", t.destination, "err", err)
		return nil
	}
	return t.sink.Enqueue(c)
}

// author is who made a change, asked only once a target takes it: a record taken is gone, and
// another watcher of the object (a rule whose labels select it) may need it.
type author struct {
	w         *watcher
	obj       *unstructured.Unstructured
	clean     map[string]any
	opName    string
	unchanged bool // a listed object, or a status-only update: nobody to credit

	asked    bool
	credit   gitops.Credit
	user     string
	managers []string
}

// get asks once, and returns the credit, the user credited and the object's newest field managers.
func (a *author) get() (gitops.Credit, string, []string) {
	if a.asked || a.opName == "" || a.unchanged {
		return a.credit, a.user, a.managers
	}
	a.asked = true
	a.managers = newestManagers(a.obj)
	w := a.w
	if _, off := w.authors.(noAuthors); off {
		return a.credit, a.user, a.managers
	}
	// Authors key on the canonical JSON, as the admission webhook saw the object.
	canon, err := sanitize.JSON(a.clean)
	if err != nil {
		return a.credit, a.user, a.managers // credited to the bot
	}
	var known bool
	a.credit, known = w.authors.Author(a.opName, w.groupKind(), a.obj.GetNamespace(), a.obj.GetName(), canon)
	if !known && a.opName == "CREATE" && w.selection.server != nil { // it may have been relabelled into the selector
		a.credit, known = w.authors.Author("UPDATE", w.groupKind(), a.obj.GetNamespace(), a.obj.GetName(), canon)
	}
	if known {
		a.user = a.credit.Author.Name
	}
	return a.credit, a.user, a.managers
}

// tooLarge reports an object whose file would exceed the cap: one such object must not bloat
// the history for good or exhaust the daemon's memory on every clone and push.
func (w *watcher) tooLarge(obj *unstructured.Unstructured, size int) {
	w.metrics.ObjectsTooLarge.Inc()
	dests := make([]string, len(w.targets))
	for i, t := range w.targets {
		dests[i] = t.destination
	}
	msg := fmt.Sprintf("not mirrored to Git (%s): its canonical YAML is %d bytes, over the %d-byte cap per file",
		strings.Join(dests, ", "), size, gitops.MaxFileBytes)
	w.log.Warn("object too large; not written", "object", w.describe(obj), "bytes", size, "cap", gitops.MaxFileBytes)
	w.recorder.Event(&corev1.ObjectReference{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
	}, corev1.EventTypeWarning, "TooLargeForGit", msg)
}

// writeOp is the operations a write counts as, and its verb in commit messages.
type writeOp struct {
	bits ops
	verb string
}

// writeOps are the writeOp of what the watch saw ("" for a listed object, which may be new or
// changed).
var writeOps = map[string]writeOp{
	"CREATE": {opCreate, "create"},
	"UPDATE": {opUpdate, "update"},
	"":       {opCreate | opUpdate, "sync"},
}

func (w *watcher) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: w.sel.GVR.Group, Kind: w.sel.Kind}
}

func (w *watcher) path(t target, obj *unstructured.Unstructured) string {
	return mirrorPath(t.baseFolder, w.sel, obj.GetNamespace(), obj.GetName())
}

func (w *watcher) describe(obj *unstructured.Unstructured) string {
	return describe(w.sel.GVR.Resource, obj.GetNamespace(), obj.GetName())
}

func key(obj *unstructured.Unstructured) string {
	return obj.GetNamespace() + "/" + obj.GetName()
}

// keyHash is the hash of key(obj), which the watcher's content hashes are kept by: 8 bytes an
// object instead of a string, and nothing to allocate per event. Two objects whose keys share a
// hash (less than one chance in a billion among 100,000 objects) cost at most a change that was
// not needed: a write, since the content hashes that share the slot differ (an object's
// canonical YAML holds its namespace and name), or the delete of a file never written when one
// of them leaves a selection.
func (w *watcher) keyHash(obj *unstructured.Unstructured) uint64 {
	var h maphash.Hash
	h.SetSeed(w.seed)
	h.WriteString(obj.GetNamespace())
	h.WriteByte('/')
	h.WriteString(obj.GetName())
	return h.Sum64()
}

// scope is the folder of a selection inside a destination: the only place its orphans can be.
// A selection of a namespaced resource in every namespace uses "*" for the namespace folder.
func scope(baseFolder string, sel Selection) string {
	ns := sel.Namespace
	if sel.Namespaced && ns == "" {
		ns = "*"
	}
	p := layout.Path(baseFolder, sel.GVR.Group, sel.GVR.Resource, ns, "x")
	return p[:len(p)-len("x.yaml")]
}
