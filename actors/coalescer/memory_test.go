package coalescer

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// TestStreamAtRestHoldsNoEventData follows a Stream's buffers: the pending
// event's data is a buffer of its own that leaves with it, so after a
// Flush the Stream holds none; a buffer starts at its first input's size,
// or at the size merged events reached while they merge, and never passes
// MaxBlocks; a remove that loses no hash uses no scratch buffer.
func TestStreamAtRestHoldsNoEventData(t *testing.T) {
	wk := messages.WorkerKey{Worker: 1}
	s := New(wk, Config{MaxBlocks: 8})
	next := messages.ExternalHash(0)
	store := func(n int, parent messages.ExternalHash) messages.PlacementEvent {
		ev := messages.PlacementEvent{Placement: messages.Placement{Worker: wk},
			Event: messages.KvCacheEvent{Kind: messages.KindStored, HasParent: parent != 0, ParentHash: parent}}
		for range n {
			next++
			ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: next, TokensHash: messages.LocalHash(next)})
		}
		return ev
	}
	remove := func(hs ...messages.ExternalHash) messages.PlacementEvent {
		return messages.PlacementEvent{Placement: messages.Placement{Worker: wk},
			Event: messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: hs}}
	}
	atRest := func(step string) {
		t.Helper()
		if s.pend.blocks != nil || s.pend.removed != nil || s.scratch != nil {
			t.Fatalf("%s: at rest the Stream holds buffers of %d blocks, %d hashes, %d scratch",
				step, cap(s.pend.blocks), cap(s.pend.removed), cap(s.scratch))
		}
	}
	atRest("new")

	out := s.Push(store(3, 0), nil)
	if len(out) != 0 || cap(s.pend.blocks) != 3 || s.pend.removed != nil {
		t.Fatalf("a 3-block store: %d emitted, buffers of %d blocks and %d hashes", len(out), cap(s.pend.blocks), cap(s.pend.removed))
	}
	out = s.Flush(out)
	atRest("flushed")
	if len(out) != 1 || len(out[0].Event.Blocks) != 3 {
		t.Fatalf("flush emitted %+v", out)
	}

	// A chain of 3-block stores merges: the buffer doubles (3, 6), a merge
	// that would pass MaxBlocks flushes first and starts the next one.
	out = s.Push(store(3, 0), out[:0])
	for range 3 {
		out = s.Push(store(3, next), out)
		if c := cap(s.pend.blocks); c > 8 {
			t.Fatalf("pending buffer of %d blocks, MaxBlocks 8", c)
		}
	}
	if len(out) != 1 || len(out[0].Event.Blocks) != 6 {
		t.Fatalf("merged chain emitted %d events", len(out))
	}
	out = s.Flush(out)
	atRest("flushed a merged chain")
	// While stores merge, the next one starts at the size they reached.
	out = s.Push(store(2, 0), out[:0])
	if c := cap(s.pend.blocks); c != 6 {
		t.Fatalf("after merged events a 2-block store starts a buffer of %d blocks, want 6", c)
	}
	// After one that took no merge, at its own size again.
	out = s.Push(store(2, 0), s.Flush(out))
	if c := cap(s.pend.blocks); c != 2 {
		t.Fatalf("after an unmerged event a 2-block store starts a buffer of %d blocks, want 2", c)
	}
	s.Flush(out)

	out = s.Push(remove(1, 2), nil)
	if s.scratch != nil || len(s.pend.removed) != 2 {
		t.Fatalf("a remove that loses no hash: scratch of %d, %d pending", cap(s.scratch), len(s.pend.removed))
	}
	s.Flush(out)
	atRest("flushed a remove")
}
