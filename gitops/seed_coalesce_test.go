package gitops

import (
	"fmt"
	"testing"
)

// TestSeedPastTheInboxBoundIsNoCoalescing fills an inbox far past its bound with a seed (every
// change by the bot, as a list writes them) and then with one change by alice: merging the seed
// loses no credit and is not reported; merging alice's change is.
func TestSeedPastTheInboxBoundIsNoCoalescing(t *testing.T) {
	in := newInbox()
	for i := range 3 * maxInboxItems {
		name := fmt.Sprintf("cm-%05d", i)
		if _, coalesced := in.put(item{change: Change{Path: cmPath(name), Content: configMap(name, "0", 10)}}, testBot); coalesced {
			t.Fatalf("a seed of %d changes by the bot was reported as coalesced", i+1)
		}
	}
	if depth := in.depth(); depth > 3*maxInboxItems {
		t.Fatalf("%d changes wait, want them merged per path", depth)
	}
	in.put(item{change: Change{Path: cmPath("cm-00001"), Content: configMap("cm-00001", "1", 10), Credit: Credit{Author: testAlice}}}, testBot)
	reported := false
	for i := range 6 * maxInboxItems {
		name := fmt.Sprintf("cm-%05d", i%100)
		_, coalesced := in.put(item{change: Change{Path: cmPath(name), Content: configMap(name, "2", 10)}}, testBot)
		reported = reported || coalesced
	}
	if !reported {
		t.Error("merging a change by alice into the bot's was not reported")
	}
}
