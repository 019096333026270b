package normalizer

import (
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
)

// A removed hash whose engine still holds a copy (remaining_copy_counts >
// 0) stays indexed; the last copy's removal, and a removal without counts,
// remove it. A later store chained on a kept hash still finds its parent.
func TestRemovedKeepsHashesWithCopiesLeft(t *testing.T) {
	n := New(Config{})
	out := run(t, n, batch(0,
		stored([]uint64{5, 6, 7}, 1, 2, 3, 4, 5, 6),
		with(removed(5, 6, 7), func(ev *wire.Event) { ev.RemainingCopies = []uint32{1, 0, 3} }),
		removed(7),
		with(stored([]uint64{8}, 7, 8), parent(5)),
	))
	if r := out[1].Event.Event; r.Kind != messages.KindRemoved || !slices.Equal(r.Removed, []messages.ExternalHash{6}) {
		t.Errorf("with copies left: removed %v, want [6]", r.Removed)
	}
	if r := out[2].Event.Event; !slices.Equal(r.Removed, []messages.ExternalHash{7}) {
		t.Errorf("without counts: removed %v, want [7]", r.Removed)
	}
	if !out[3].Accepted() {
		t.Errorf("store chained on the kept hash 5: %v %s", out[3].Reason, out[3].Detail)
	}
}
