package indexer

import (
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

func stored(id uint64, parent messages.ExternalHash, hasParent bool, hashes ...messages.ExternalHash) messages.RouterEvent {
	ev := messages.RouterEvent{WorkerID: 1, Event: messages.KvCacheEvent{EventID: id, Kind: messages.KindStored,
		HasParent: hasParent, ParentHash: parent}}
	for _, h := range hashes {
		ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: h, TokensHash: messages.LocalHash(h * 10)})
	}
	return ev
}

func removed(id uint64, hashes ...messages.ExternalHash) messages.RouterEvent {
	return messages.RouterEvent{WorkerID: 1, Event: messages.KvCacheEvent{EventID: id, Kind: messages.KindRemoved, Removed: hashes}}
}

var w1 = messages.WorkerKey{Worker: 1}

func TestMemIndexRules(t *testing.T) {
	x := NewMemIndex()
	x.Apply(stored(1, 0, false, 1, 2, 3))
	x.Apply(stored(2, 2, true, 4)) // branch under 2
	x.Apply(stored(3, 9, true, 5)) // unknown parent: kept detached, counted
	if got := x.Blocks(w1); !slices.Equal(got, []messages.ExternalHash{1, 2, 3, 4, 5}) {
		t.Fatalf("blocks %v", got)
	}
	x.Apply(removed(4, 2)) // drops 2 and its descendants 3, 4
	if got := x.Blocks(w1); !slices.Equal(got, []messages.ExternalHash{1, 5}) {
		t.Fatalf("after remove: %v", got)
	}
	x.Apply(stored(5, 1, true, 3))  // 3 again, now under 1
	x.Apply(removed(6, 77))         // unknown: counted
	x.Apply(stored(6, 0, false, 8)) // stale id: ignored
	x.Apply(stored(9, 0, false, 9)) // gap: applied, counted
	if got := x.Blocks(w1); !slices.Equal(got, []messages.ExternalHash{1, 3, 5, 9}) {
		t.Fatalf("blocks %v", got)
	}
	st := x.Stats()
	if st.UnknownParent != 1 || st.UnknownRemoved != 1 || st.Stale != 1 || st.IDGaps != 1 {
		t.Errorf("stats %+v", st)
	}
	other := messages.RouterEvent{WorkerID: 1, Event: messages.KvCacheEvent{EventID: 1, DpRank: 1, Kind: messages.KindStored, Blocks: []messages.StoredBlock{{BlockHash: 1}}}}
	x.Apply(other)
	x.Apply(messages.RouterEvent{WorkerID: 1, Event: messages.KvCacheEvent{EventID: 10, Kind: messages.KindCleared}})
	if len(x.Blocks(w1)) != 0 || len(x.Blocks(messages.WorkerKey{Worker: 1, DpRank: 1})) != 1 {
		t.Fatal("a clear is scoped to its (worker, dp_rank)")
	}
	x.Clear(messages.WorkerKey{Worker: 1, DpRank: 1})
	if len(x.Streams()) != 1 {
		t.Fatalf("streams %v", x.Streams())
	}
}

func TestMemIndexRemoveUnlinksFromParent(t *testing.T) {
	x := NewMemIndex()
	x.Apply(stored(1, 0, false, 1, 2))
	x.Apply(removed(2, 2))
	x.Apply(stored(3, 0, false, 5, 2)) // 2 re-stored under 5
	x.Apply(removed(4, 1))             // must not take 2 with it any more
	if got := x.Blocks(w1); !slices.Equal(got, []messages.ExternalHash{2, 5}) {
		t.Fatalf("blocks %v", got)
	}
}
