package clusterindex

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// TestFences: a shard follows the newest feed of each stream: the old
// owner's late batches are dropped, the new owner's first batch clears the
// stream, a RemoveWorker closes the followed feed until a newer one opens,
// and streams are fenced independently.
func TestFences(t *testing.T) {
	a := messages.WorkerKey{Worker: 1}
	b := messages.WorkerKey{Worker: 1, DpRank: 1}
	fs := fences{}
	type step struct {
		k            messages.WorkerKey
		feed         uint64
		apply, reset bool
	}
	run := func(steps ...step) {
		t.Helper()
		for i, s := range steps {
			if apply, reset := fs.admit(s.k, s.feed); apply != s.apply || reset != s.reset {
				t.Fatalf("step %d %+v: apply %v reset %v", i, s, apply, reset)
			}
		}
	}
	run(step{a, 10, true, false}, step{a, 10, true, false}, // the first feed is followed
		step{b, 5, true, false},   // another stream, its own fence
		step{a, 20, true, true},   // a newer owner takes over: clear first
		step{a, 10, false, false}, // the old owner's late batch: dropped
		step{a, 20, true, false}, step{b, 5, true, false})
	fs.close(1)
	run(step{a, 20, false, false}, step{b, 5, false, false}, // removed: late batches dropped
		step{a, 30, true, true}) // registered again: a new listener
	fs = fences{}
	run(step{a, 0, true, false})
	fs.close(1)
	run(step{a, 0, true, false}) // unstamped streams are not fenced
}

// TestFeedClock: ids grow even when the wall clock does not, and carry
// the member's tag.
func TestFeedClock(t *testing.T) {
	c := feedClock{tag: 7}
	last := uint64(0)
	for _, now := range []uint64{1 << 40, 1 << 40, 1<<40 - 5_000_000, 1<<40 + 1<<20} {
		id := c.next(now)
		if id <= last || id&0xffff != 7 {
			t.Fatalf("now %d: id %d after %d", now, id, last)
		}
		last = id
	}
}

// TestBatchKey: a batch's stream comes from its clear, its events or its
// position.
func TestBatchKey(t *testing.T) {
	k := messages.WorkerKey{Worker: 4, DpRank: 2}
	for _, b := range []*messages.RouterEventBatch{
		{Clear: []messages.WorkerKey{k}},
		{Events: []messages.RouterEvent{{WorkerID: 4, Event: messages.KvCacheEvent{DpRank: 2}}}},
		{Position: messages.Position{Stream: messages.StreamID{Worker: 4, DpRank: 2}}},
	} {
		if got := batchKey(b); got != k {
			t.Fatalf("%+v: key %v", b, got)
		}
	}
}
