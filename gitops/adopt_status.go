package gitops

import (
	"errors"
	"maps"
	"reflect"
	"slices"

	"github.com/configbutler/gitops-reverser/placement"
)

// AdoptedLive declares the live objects of one kind for an adopted folder, after a list: the
// folder's documents of that kind (in Namespace, or in every namespace when it is "") whose
// objects are not live are absent from the cluster. Adoption deletes nothing of the team's by
// surprise: they are listed (AdoptedStatus.Absent) and left in place, unless Prune.
type AdoptedLive struct {
	Folder      string
	Group, Kind string
	Namespace   string
	Live        map[placement.Key]struct{}
	Prune       bool
}

// AdoptedStatus is what a worker knows of one adopted folder.
type AdoptedStatus struct {
	// Problems are the files of the folder the index could not read as Kubernetes documents
	// and the identities that two documents claim; everything else goes on.
	Problems []placement.Problem
	// Unwritten are the objects whose last change was not written, and why.
	Unwritten map[placement.Key]string
	// Absent are the documents whose objects the cluster does not have, left in place.
	Absent map[placement.Key]placement.Location
}

// adoptedState is the status of an adopted folder as the worker builds it.
type adoptedState struct {
	unwritten map[placement.Key]string
	absent    map[placement.Key]placement.Location
}

// absent handles an AdoptedLive: the documents of its kind whose objects are not live are
// listed, or removed when it prunes.
func (w *Worker) absent(fs files, s *AdoptedLive) ([]Change, error) {
	f, err := w.folderIndex(s.Folder, fs.tree, fs.run)
	if err != nil {
		return nil, err
	}
	var gone []placement.Key
	f.index.All(func(k placement.Key, loc placement.Location) {
		if k.Group != s.Group || k.Kind != s.Kind || (s.Namespace != "" && k.Namespace != s.Namespace) {
			return
		}
		if _, live := s.Live[k]; live {
			delete(f.state.absent, k)
			return
		}
		gone = append(gone, k)
		f.state.absent[k] = loc
	})
	if !s.Prune {
		return nil, nil
	}
	slices.SortFunc(gone, func(a, b placement.Key) int { return compareKeys(a, b) })
	var out []Change
	for _, k := range gone {
		delete(f.state.absent, k)
		c := Change{Summary: "prune " + k.String() + " (absent from the cluster)",
			Adopt: &Adoption{Folder: s.Folder, Key: k, Delete: true}}
		changes, _, err := w.adopt(fs, &c)
		if w.adoptionFailed(err) {
			return nil, err
		}
		out = append(out, changes...)
	}
	return out, nil
}

func compareKeys(a, b placement.Key) int {
	for _, c := range [][2]string{{a.Group, b.Group}, {a.Kind, b.Kind}, {a.Namespace, b.Namespace}, {a.Name, b.Name}} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// adoptionFailed records an AdoptionError (the object is not written; the rest of the run goes
// on) and reports whether err is another error, which fails the run.
func (w *Worker) adoptionFailed(err error) bool {
	var ae *AdoptionError
	if !errors.As(err, &ae) {
		return err != nil
	}
	w.log.Warn("object of an adopted folder not written", "folder", ae.Folder, "object", ae.Key.String(), "err", ae.Err)
	w.m.adoptionFailed()
	if f := w.adopted[ae.Folder]; f != nil {
		f.state.unwritten[ae.Key] = ae.Err.Error()
	}
	return false
}

// adoptedWritten notes that an object's change was written: a reason it was not before is gone.
func (w *Worker) adoptedWritten(a *Adoption) {
	if f := w.adopted[a.Folder]; f != nil {
		delete(f.state.unwritten, a.Key)
		delete(f.state.absent, a.Key)
	}
}

// publishAdopted copies what the worker knows of its adopted folders into its status.
func (w *Worker) publishAdopted() {
	if len(w.adopted) == 0 {
		return
	}
	out := make(map[string]AdoptedStatus, len(w.adopted))
	for folder, f := range w.adopted {
		out[folder] = AdoptedStatus{
			Problems:  f.index.Problems(),
			Unwritten: maps.Clone(f.state.unwritten),
			Absent:    maps.Clone(f.state.absent),
		}
	}
	changed := false
	w.setStatus(func(s *WorkerStatus) {
		changed = !reflect.DeepEqual(s.Adopted, out)
		s.Adopted = out
	})
	if changed {
		w.onStatus() // the destination's status says what the folder holds
	}
}
