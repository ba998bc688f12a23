package receiver

import (
	"fmt"
	"net/http"

	"golang.org/x/sync/semaphore"

	"github.com/configbutler/gitops-reverser/metrics"
)

// DefaultBodyBudget is how many bytes of request bodies the handler holds at once across every
// request when HandlerConfig.BodyBudget is zero: four bodies of MaxBodyBytes. Many large
// deliveries at once, forged or not, cost at most this much memory for their bodies.
const DefaultBodyBudget = 4 * MaxBodyBytes

// busyRetryAfter is the Retry-After, in seconds, of a delivery refused because the budget is spent.
const busyRetryAfter = "5"

// reasonBusy is the reason a delivery is refused for when the body budget is spent.
const reasonBusy = "Busy"

// bodyBudget is the bytes of request bodies the handler may hold at once. A request reserves its
// share before reading its body and gives it back when it is done with the body; one that cannot
// reserve at once is refused, never queued, so waiting requests hold nothing either.
type bodyBudget struct {
	sem *semaphore.Weighted
}

func newBodyBudget(size int64) *bodyBudget {
	if size <= 0 {
		size = DefaultBodyBudget
	}
	return &bodyBudget{sem: semaphore.NewWeighted(size)}
}

// reserve takes the bytes r's body may need: its Content-Length, or MaxBodyBytes when the length
// is unknown. A declared length over MaxBodyBytes is answered 413 without reserving, and bytes
// that are not free now 503 with a Retry-After. On success the caller calls release once it is
// done with the body.
func (b *bodyBudget) reserve(w http.ResponseWriter, r *http.Request) (release func(), v verdict, ok bool) {
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLargeVerdict(), false
	}
	n := r.ContentLength
	if n < 0 {
		n = MaxBodyBytes
	}
	if !b.sem.TryAcquire(n) {
		w.Header().Set("Retry-After", busyRetryAfter)
		return nil, refusedVerdict(http.StatusServiceUnavailable, metrics.ReceiverBusy, reasonBusy,
			"the receiver is busy reading other deliveries; retry later"), false
	}
	return func() { b.sem.Release(n) }, verdict{}, true
}

// tooLargeVerdict answers a body over MaxBodyBytes.
func tooLargeVerdict() verdict {
	return refusedVerdict(http.StatusRequestEntityTooLarge, metrics.ReceiverTooLarge, ReasonBodyTooLarge,
		fmt.Sprintf("the body is over %d bytes", MaxBodyBytes))
}
