package receiver

import (
	"strconv"
	"testing"
)

// BenchmarkVerifyGitHubPush verifies a signed GitHub push of the recorded kind (about 8 KB):
// HMAC, headers and repository extraction.
func BenchmarkVerifyGitHubPush(b *testing.B) {
	body := mustPayload(b, "github-commit-event.json")
	h := signed(TypeGitHub, testToken, body, "push", "d")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(TypeGitHub, testToken, h, body, []string{"push"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeliveriesSeen records a new delivery id in a full set.
func BenchmarkDeliveriesSeen(b *testing.B) {
	d := NewDeliveries(DefaultDeliveryTTL, 10_000, nil)
	ids := make([]string, 20_000)
	for i := range ids {
		ids[i] = "delivery-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d.Seen("ns/receiver", ids[i%len(ids)])
		i++
	}
}
