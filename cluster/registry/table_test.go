package registry

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

func entry(w int, clock uint64, origin string, deleted bool) Entry {
	return Entry{Key: messages.WorkerKey{Worker: messages.WorkerID(w)}, Worker: Worker{Model: "m", Endpoint: origin},
		Version: Version{Clock: clock, Origin: origin}, Deleted: deleted}
}

// TestMergeConverges: replicas that see the same entries in any order,
// any number of times, hold the same table; the highest version of each
// key wins, a tombstone included.
func TestMergeConverges(t *testing.T) {
	writes := []Entry{
		entry(1, 10, "a", false), entry(1, 12, "b", true), entry(1, 12, "a", false), // tombstone wins (origin b > a)
		entry(2, 5, "a", false), entry(2, 7, "c", false),
		entry(3, 9, "b", true),
	}
	want := NewTable()
	want.Merge(writes...)
	if got := want.Live(); len(got) != 1 || got[0] != writes[4] {
		t.Fatalf("live %v, want only %v", got, writes[4])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		tb := NewTable()
		for range 3 {
			perm := rng.Perm(len(writes))
			for _, i := range perm {
				tb.Merge(writes[i])
			}
		}
		if !reflect.DeepEqual(tb.All(), want.All()) {
			t.Fatalf("order-dependent: %v, want %v", tb.All(), want.All())
		}
	}
	if want.Merge(writes...) {
		t.Fatal("merging known entries again reports a change")
	}
}

// TestStampAboveEverythingSeen: a write is versioned above every clock the
// table has seen (a re-registration after a tombstone written elsewhere
// wins), and at least the given wall clock.
func TestStampAboveEverythingSeen(t *testing.T) {
	tb := NewTable()
	tb.Merge(entry(1, 100, "z", true))
	e := tb.Stamp(entry(1, 0, "", false), "a", 50)
	if e.Version.Clock <= 100 || e.Version.Origin != "a" {
		t.Fatalf("stamped %+v, want a clock above 100 by a", e.Version)
	}
	if !tb.Merge(e) {
		t.Fatal("the new write did not win over the tombstone")
	}
	if _, ok := tb.Get(e.Key); !ok {
		t.Fatal("re-registered key not live")
	}
	if e2 := tb.Stamp(entry(2, 0, "", false), "a", 1_000_000); e2.Version.Clock != 1_000_000 {
		t.Fatalf("clock %d, want the wall clock 1000000", e2.Version.Clock)
	}
}
