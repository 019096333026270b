package registry

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// TestOwner: every host computes the same owner whatever the order of its
// member list; streams spread over the members; a member leaving moves
// only its own streams, one joining takes streams only for itself.
func TestOwner(t *testing.T) {
	members := []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}
	reversed := []string{members[2], members[1], members[0]}
	count := map[string]int{}
	for w := range 600 {
		k := messages.WorkerKey{Worker: messages.WorkerID(w), DpRank: messages.DpRank(w % 2)}
		o := Owner(members, k)
		if o != Owner(reversed, k) {
			t.Fatalf("%v: owner depends on the list's order", k)
		}
		count[o]++
		if after := Owner(members[1:], k); o != members[0] && after != o {
			t.Fatalf("%v moved from %s to %s when %s left", k, o, after, members[0])
		}
		if joined := Owner(append([]string{"10.0.0.4:7000"}, members...), k); joined != o && joined != "10.0.0.4:7000" {
			t.Fatalf("%v moved from %s to %s, not to the joining member", k, o, joined)
		}
	}
	for _, m := range members {
		if count[m] < 150 {
			t.Fatalf("member %s owns %d of 600 streams: not spread (%v)", m, count[m], count)
		}
	}
	if Owner(nil, messages.WorkerKey{}) != "" {
		t.Fatal("owner without members")
	}
}
