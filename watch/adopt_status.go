package watch

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/configbutler/gitops-reverser/crds"
	"github.com/configbutler/gitops-reverser/gitops"
)

// reportAdopted sets status.adopted of a destination of layout Existing from what its worker
// found in the folder, and tells each new problem and absent document once as a Warning Event.
func (m *Manager) reportAdopted(ctx context.Context, d *destination) error {
	if !d.usable || !d.obj.Adopted() {
		return nil
	}
	st, ok := m.opts.Pool.WorkerStatus(d.repo.obj.Spec.RepoURL, d.obj.Lane())
	if !ok {
		return nil
	}
	folder, found := st.Adopted[d.obj.Spec.BaseFolder]
	if !found {
		return nil // not indexed yet
	}
	want := adoptedStatus(folder)
	old := d.obj.Status.Adopted
	if old == nil {
		old = &crds.AdoptedStatus{}
	}
	ref := crds.ObjectReference(crds.KindGitDestination, d.obj)
	for _, p := range fresh(want.Problems, old.Problems) {
		m.reporter.recorder.Event(ref, corev1.EventTypeWarning, "AdoptedFolderProblem", p)
	}
	for _, p := range fresh(want.Unwritten, old.Unwritten) {
		m.reporter.recorder.Event(ref, corev1.EventTypeWarning, "AdoptedObjectNotWritten", p)
	}
	if n := len(fresh(want.Absent, old.Absent)); n > 0 {
		m.reporter.recorder.Eventf(ref, corev1.EventTypeWarning, "AbsentFromCluster",
			"%d documents of %s hold objects the cluster does not have; they are left in place (see status.adopted.absent; spec.existing.prune removes them)",
			len(folder.Absent), d.obj.Spec.BaseFolder)
	}
	if reflect.DeepEqual(want, *old) {
		return nil
	}
	// A merge patch: an emptied list is sent as null, which removes it.
	return m.reporter.patchStatusField(ctx, destinationKind, d.obj, "adopted",
		map[string]any{"problems": want.Problems, "unwritten": want.Unwritten, "absent": want.Absent})
}

// adoptedStatus is the status of one adopted folder as the GitDestination shows it.
func adoptedStatus(f gitops.AdoptedStatus) crds.AdoptedStatus {
	var s crds.AdoptedStatus
	for _, p := range f.Problems {
		s.Problems = append(s.Problems, p.String())
	}
	for k, why := range f.Unwritten {
		s.Unwritten = append(s.Unwritten, k.String()+": "+why)
	}
	for k, loc := range f.Absent {
		s.Absent = append(s.Absent, fmt.Sprintf("%s (%s, document %d)", k, loc.Path, loc.Doc+1))
	}
	return crds.AdoptedStatus{Problems: capped(s.Problems), Unwritten: capped(s.Unwritten), Absent: capped(s.Absent)}
}

// capped sorts a list and keeps MaxAdoptedEntries of it, and a last entry that counts the rest.
func capped(list []string) []string {
	slices.Sort(list)
	if len(list) <= crds.MaxAdoptedEntries {
		return list
	}
	rest := len(list) - crds.MaxAdoptedEntries
	return append(list[:crds.MaxAdoptedEntries], fmt.Sprintf("… and %d more", rest))
}

// fresh lists the entries of now that before lacks.
func fresh(now, before []string) []string {
	var out []string
	for _, s := range now {
		if !slices.Contains(before, s) {
			out = append(out, s)
		}
	}
	return out
}
