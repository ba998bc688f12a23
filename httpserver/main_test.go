package httpserver

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every server's Run, and every
// connection it served, must have ended. Clients close their idle connections themselves.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
