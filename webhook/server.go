package webhook

import (
	"time"

	"github.com/configbutler/gitops-reverser/httpserver"
)

// ServerLimits are the admission webhook's limits, for the httpserver that serves it. An
// AdmissionReview carries the object and, for updates, the old object too; etcd caps an object
// near 1.5 MiB, so 8 MiB of body leaves room for both plus JSON overhead. The apiserver waits
// seconds at most for a review, so a connection may not hold the server longer than that.
func ServerLimits() httpserver.Limits {
	return httpserver.Limits{
		ReadTimeout:    10 * time.Second,
		WriteTimeout:   10 * time.Second,
		MaxHeaderBytes: 16 << 10,
		MaxBodyBytes:   8 << 20,
	}
}
