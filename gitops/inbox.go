package gitops

import (
	"context"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// maxInboxItems is how many intents may wait in an inbox before they are coalesced per path.
// The inbox only grows while its worker is busy with one push attempt; past the bound the
// intents are merged (latest content per path, credited to the bot), so what waits for a slow
// remote is bounded by the number of files, however long the remote takes.
const maxInboxItems = 2000

// inbox is where other goroutines leave work for a worker. Putting never blocks: a slow or dead
// remote must never stall a watch, nor the other destinations that share the watch.
type inbox struct {
	mu       sync.Mutex
	items    []item
	controls []control
	limit    int // coalesce when items exceed it; grows with what coalescing cannot shrink
	closed   bool
	wake     chan struct{} // one token: "there is something to take"
	taken    chan struct{} // closed (and replaced) at each take, for pace
	stuck    bool          // a pace gave up waiting; no pace waits again until the next take
}

// control is a request other than a file change: flush, fetch now, new credentials, or a
// function to run on the worker's goroutine (which owns the clone).
type control struct {
	flush chan error                // answered once everything put before it is pushed
	fetch chan FetchResult          // answered after a fetch of the remote branch
	auth  *authUpdate               // replaces the credentials
	run   func(ctx context.Context) // called with the worker's context
}

type authUpdate struct{ auth transport.AuthMethod }

func newInbox() *inbox {
	return &inbox{limit: maxInboxItems, wake: make(chan struct{}, 1), taken: make(chan struct{})}
}

// put adds an intent; ok is false when the worker has stopped, coalesced true when the bound
// was reached and merging the waiting intents lost a credit (see creditsAt).
func (in *inbox) put(it item, bot Signature) (ok, coalesced bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return false, false
	}
	it.at = time.Now()
	in.items = append(in.items, it)
	if len(in.items) > in.limit {
		waiting := []run{{items: in.items}}
		coalesced = creditsAt(waiting, bot)
		in.items = coalesce(waiting, bot)[0].items
		in.limit = max(maxInboxItems, 2*len(in.items))
	}
	in.signal()
	return true, coalesced
}

// request adds a control; false when the worker has stopped.
func (in *inbox) request(c control) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return false
	}
	in.controls = append(in.controls, c)
	in.signal()
	return true
}

func (in *inbox) signal() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// take empties the inbox. Every control refers to the items put before it, all of which are in
// this take or an earlier one.
func (in *inbox) take() ([]item, []control) {
	in.mu.Lock()
	defer in.mu.Unlock()
	items, controls := in.items, in.controls
	in.items, in.controls = nil, nil
	in.limit = maxInboxItems
	close(in.taken)
	in.taken, in.stuck = make(chan struct{}), false
	return items, controls
}

// paceItems is how many intents may wait before pace holds up their producer. What waits, and
// what the worker took and commits meanwhile, is most of a seed's memory, and each take is a
// commit of the whole folder's tree. In a seed of 100,000 ConfigMaps of 1 KiB (three runs each,
// one after the other, the same hour): 10,000 took 11.0-12.6 s and peaked at 135-137 MiB
// (146-153 MiB inside make bench); 7,000 took 11.9-12.2 s at 123-128 MiB; 5,000 took 12.7-13.5 s
// at 107-110 MiB. Fewer waiting means more pushes of the folder's tree, and the list waits
// during more of them.
const paceItems = 7000

// pace blocks while more than paceItems intents wait, until the worker takes them. A take
// that does not come within patience means the worker is busy with a slow or dead remote: pace
// then stops waiting, for every caller, until the worker takes again.
func (in *inbox) pace(ctx context.Context, patience time.Duration) {
	in.mu.Lock()
	if len(in.items) <= paceItems || in.closed || in.stuck {
		in.mu.Unlock()
		return
	}
	taken := in.taken
	in.mu.Unlock()
	timer := time.NewTimer(patience)
	defer timer.Stop()
	select {
	case <-taken:
	case <-ctx.Done():
	case <-timer.C:
		in.mu.Lock()
		if in.taken == taken {
			in.stuck = true
		}
		in.mu.Unlock()
	}
}

// close refuses further puts and returns what is left.
func (in *inbox) close() ([]item, []control) {
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	return in.take()
}

// depth is the number of intents waiting.
func (in *inbox) depth() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.items)
}
