package httpserver

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
)

// ErrBodyTooLarge is why ReadBody refused a request's body: it is larger than the limit.
var ErrBodyTooLarge = errors.New("request body too large")

// ReadBody reads the request's body into buf, at most limit bytes: a body of known length is read
// into a buffer of that size, so it takes no more memory than it said. A body over the limit, by
// its Content-Length or as read, is refused with an error wrapping ErrBodyTooLarge (answer 413);
// any other error is a body that could not be read (answer 400).
func ReadBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer, limit int64) error {
	if r.ContentLength > limit {
		return fmt.Errorf("%w: %d bytes, over %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead spare to see EOF without growing
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			return fmt.Errorf("%w: over %d", ErrBodyTooLarge, limit)
		}
		return err
	}
	return nil
}
