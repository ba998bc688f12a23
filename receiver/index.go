package receiver

import "sync/atomic"

// Target is one destination a Receiver may make reconcile, with the repository it mirrors.
type Target struct {
	Namespace, Name string // the GitDestination
	RepoURL         string // its GitRepoConfig's spec.repoUrl, matched against the event's repository
}

// Entry is a Receiver as the handler needs it, resolved by the controller.
type Entry struct {
	Namespace, Name string // the Receiver
	Type            string
	Token           []byte
	Events          []string
	Targets         []Target
	// NotReady, when set, says why the Receiver answers 503 (suspended, its Secret missing, no
	// destination): nothing is verified or triggered.
	NotReady string
}

// Key is "namespace/name" of the Receiver.
func (e *Entry) Key() string { return e.Namespace + "/" + e.Name }

// Index finds a Receiver by its webhook path in one map lookup. The controller replaces it whole
// (Set); the handler reads it without locking.
type Index struct {
	paths atomic.Pointer[map[string]*Entry]
}

// Set replaces every entry; paths are WebhookPath values.
func (x *Index) Set(byPath map[string]*Entry) { x.paths.Store(&byPath) }

// Lookup returns the entry of a webhook path, or nil.
func (x *Index) Lookup(path string) *Entry {
	p := x.paths.Load()
	if p == nil {
		return nil
	}
	return (*p)[path]
}
