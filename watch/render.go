package watch

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/sanitize"
)

// destinationRules is what one destination's rules make the mirror write, as the last reconcile
// published it: other goroutines (write-back) read it through Selections and Render, never the
// state the Run goroutine owns.
type destinationRules struct {
	baseFolder string
	selected   []selected
}

// selected is one selection of a destination with what its rules say of it.
type selected struct {
	sel        Selection // its Ops and filter are this destination's own
	recipients []string  // of a Secrets selection: what its files are encrypted for
}

// covering unites the destination's selections of resource gr that cover namespace (several
// rules, or versions, may select it), or says there is none.
func (d *destinationRules) covering(gr schema.GroupResource, namespace string) (selected, bool) {
	var out selected
	found := false
	for _, s := range d.selected {
		if !s.sel.covers(gr, namespace) {
			continue
		}
		if !found {
			out, found = s, true
			continue
		}
		out.sel.Ops |= s.sel.Ops
		out.sel.filter = out.sel.filter.and(s.sel.filter)
		if out.recipients == nil {
			out.recipients = s.recipients
		}
	}
	return out, found
}

// covers says whether the selection holds the objects of gr in namespace: a namespaced one its
// own namespace, or every one when it has none (ClusterWatchRule); a cluster-scoped one only "".
func (s Selection) covers(gr schema.GroupResource, namespace string) bool {
	if s.GVR.GroupResource() != gr {
		return false
	}
	if !s.Namespaced {
		return namespace == ""
	}
	return namespace != "" && (s.Namespace == "" || s.Namespace == namespace)
}

// Render is the change the mirror makes for the object namespace/name of resource gvr in destination
// ("namespace/name" of its GitDestination), through the mirror's own rules: its file at the
// mirror's path (layout.Path of the destination's baseFolder) with the mirror's content (sanitized canonical YAML; a Secret
// sealed for the destination's recipients), or the file's deletion when live is nil. ok is false when the
// destination's rules do not select that resource in that namespace, or the mirror would not write
// it (an object outside the rules' label selectors, a generated object the rules leave out, over gitops.MaxFileBytes, a Secret the destination does not encrypt). Safe to call from any goroutine.
//
// Write-back hands back what a Proposal that was not applied leaves: only what the mirror itself
// would write, so a proposal cannot make Git hold a plain Secret or an object no rule selects.
// live must be that object: another one is an error, not a file at this one's path.
func (m *Manager) Render(destination string, gvr schema.GroupVersionResource, namespace, name string, live *unstructured.Unstructured) (gitops.Change, bool, error) {
	p := m.published.Load()
	if p == nil {
		return gitops.Change{}, false, nil
	}
	d := (*p)[destination]
	if d == nil {
		return gitops.Change{}, false, nil
	}
	s, ok := d.covering(gvr.GroupResource(), namespace)
	if !ok {
		return gitops.Change{}, false, nil
	}
	desc := describe(gvr.Resource, namespace, name)
	c := gitops.Change{Path: mirrorPath(d.baseFolder, s.sel, namespace, name), Summary: "restore " + desc}
	if live == nil {
		return c, s.sel.Ops&opDelete != 0, nil
	}
	if live.GetNamespace() != namespace || live.GetName() != name ||
		live.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: s.sel.GVR.Group, Kind: s.sel.Kind}) {
		return gitops.Change{}, false, fmt.Errorf("render %s: the live object is %s %s/%s", desc,
			live.GroupVersionKind().GroupKind(), live.GetNamespace(), live.GetName())
	}
	if s.sel.Ops&(opCreate|opUpdate) == 0 || generated(s.sel, live) != "" && !s.sel.filter.keepGenerated ||
		isSecrets(s.sel) && len(s.recipients) == 0 || !m.SelectsObject(s.sel, namespace, live.GetLabels()) {
		return gitops.Change{}, false, nil
	}
	content, fits, err := fileContent(sanitize.Object(live.Object))
	if err != nil {
		return gitops.Change{}, false, fmt.Errorf("render %s: %w", desc, err)
	}
	if !fits {
		return gitops.Change{}, false, nil
	}
	if c.Content, c.Keep, err = seal(m.opts.Sealer, s.sel, s.recipients, content); err != nil {
		return gitops.Change{}, false, fmt.Errorf("render %s: %w", desc, err)
	}
	return c, true, nil
}

// fileContent is the canonical YAML of the sanitized object clean, and whether it fits in a file
// (gitops.MaxFileBytes): one object must not bloat the history for good.
func fileContent(clean map[string]any) (content []byte, fits bool, err error) {
	content, err = sanitize.YAML(clean)
	if err != nil {
		return nil, false, fmt.Errorf("canonical YAML: %w", err)
	}
	return content, len(content) <= gitops.MaxFileBytes, nil
}

// errPlainSecret refuses a Secret for a target that does not encrypt: whatever let it through,
// its plaintext must not reach Git.
var errPlainSecret = errors.New("a Secret is never written to Git in plain text")

// seal is what the mirror writes for content, the canonical YAML of an object of sel, for a
// target with these recipients: content itself, or a document sealed for them, with its keep
// (see Sealer.Seal). The error never holds the plaintext.
func seal(sealer Sealer, sel Selection, recipients []string, content []byte) ([]byte, func([]byte) bool, error) {
	if len(recipients) == 0 {
		if isSecrets(sel) {
			return nil, nil, errPlainSecret
		}
		return content, nil, nil
	}
	if sealer == nil {
		return nil, nil, errors.New("encrypt: this daemon has no sealer")
	}
	doc, keep, err := sealer.Seal(content, recipients)
	if err != nil {
		return nil, nil, fmt.Errorf("encrypt: %w", err)
	}
	return doc, keep, nil
}

// mirrorPath is the file of the object namespace/name of sel in a destination's baseFolder.
func mirrorPath(baseFolder string, sel Selection, namespace, name string) string {
	return layout.Path(baseFolder, sel.GVR.Group, sel.GVR.Resource, namespace, name)
}

// describe names an object in logs and commit messages: "configmaps team-a/web".
func describe(resource, namespace, name string) string {
	if namespace != "" {
		return resource + " " + namespace + "/" + name
	}
	return resource + " " + name
}
