package predicted

import (
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

var (
	t0 = time.Unix(1_700_000_000, 0)
	wA = messages.WorkerKey{Worker: 1}
	wB = messages.WorkerKey{Worker: 2}
	wC = messages.WorkerKey{Worker: 3, DpRank: 1}
)

// prompt returns n block hashes starting at base (distinct prompts use
// distinct bases; a shared prefix shares the first hashes).
func prompt(base uint64, n int) []messages.LocalHash {
	out := make([]messages.LocalHash, n)
	for i := range out {
		out[i] = messages.LocalHash(base + uint64(i))
	}
	return out
}

func newTable(t *testing.T, cfg Config) *Table {
	t.Helper()
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func overlapOf(tb *Table, hashes []messages.LocalHash, now time.Time, k messages.WorkerKey) uint32 {
	for _, o := range tb.Overlaps(hashes, now, nil, nil) {
		if o.Key == k {
			return o.Blocks
		}
	}
	return 0
}

func stored(k messages.WorkerKey, hashes []messages.LocalHash, extBase uint64) messages.RouterEvent {
	ev := messages.RouterEvent{WorkerID: k.Worker, Event: messages.KvCacheEvent{DpRank: k.DpRank, Kind: messages.KindStored}}
	for i, h := range hashes {
		ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: messages.ExternalHash(extBase + uint64(i)), TokensHash: h})
	}
	return ev
}

func TestOverlapIsContiguousPrefix(t *testing.T) {
	tb := newTable(t, Config{})
	p := prompt(100, 5)
	tb.Record(wA, p, 0, t0)
	tb.Record(wB, p[:2], 0, t0)
	if got := overlapOf(tb, prompt(100, 8), t0, wA); got != 5 {
		t.Fatalf("A: %d blocks, want 5", got)
	}
	if got := overlapOf(tb, prompt(100, 8), t0, wB); got != 2 {
		t.Fatalf("B: %d blocks, want 2", got)
	}
	q := append(prompt(100, 3), 999, 103) // diverges at block 3
	if got := overlapOf(tb, q, t0, wA); got != 3 {
		t.Fatalf("diverging prompt: %d blocks, want 3", got)
	}
	if got := tb.Overlaps(prompt(150, 4), t0, nil, nil); len(got) != 0 {
		t.Fatalf("a prompt not starting at a predicted block 0: %v", got)
	}
}

func TestPredictionExpiresAfterTTL(t *testing.T) {
	tb := newTable(t, Config{TTL: 500 * time.Millisecond})
	p := prompt(1, 4)
	tb.Record(wA, p, 0, t0)
	if got := overlapOf(tb, p, t0.Add(499*time.Millisecond), wA); got != 4 {
		t.Fatalf("before the TTL: %d, want 4", got)
	}
	if got := overlapOf(tb, p, t0.Add(500*time.Millisecond), wA); got != 0 {
		t.Fatalf("at the TTL: %d, want 0", got)
	}
	tb.Expire(t0.Add(500 * time.Millisecond))
	if s := tb.Stats(); s.Expired != 4 || s.Blocks != 0 {
		t.Fatalf("stats %+v, want 4 expired, 0 left", s)
	}
}

func TestRecordRefreshesTTL(t *testing.T) {
	tb := newTable(t, Config{TTL: time.Second})
	p := prompt(1, 3)
	tb.Record(wA, p, 0, t0)
	tb.Record(wA, p[:2], 0, t0.Add(800*time.Millisecond))
	at := t0.Add(1200 * time.Millisecond)
	tb.Expire(at)
	if got := overlapOf(tb, p, at, wA); got != 2 {
		t.Fatalf("refreshed prefix: %d, want 2", got)
	}
	if s := tb.Stats(); s.Expired != 1 {
		t.Fatalf("expired %d, want 1 (the block not routed again)", s.Expired)
	}
}

func TestBlockRemovedKillsConfirmedPrediction(t *testing.T) {
	tb := newTable(t, Config{TTL: time.Minute})
	p := prompt(10, 6)
	tb.Record(wA, p, 0, t0)
	tb.Apply(stored(wA, p[:4], 5000)) // chunked prefill: the first 4 blocks stored
	if s := tb.Stats(); s.Confirmed != 4 {
		t.Fatalf("confirmed %d, want 4", s.Confirmed)
	}
	if got := overlapOf(tb, p, t0, wA); got != 6 {
		t.Fatalf("after a partial store: %d, want 6 (confirmed and predicted)", got)
	}
	tb.Apply(messages.RouterEvent{WorkerID: wA.Worker, Event: messages.KvCacheEvent{Kind: messages.KindRemoved,
		Removed: []messages.ExternalHash{5002, 777}}})
	if got := overlapOf(tb, p, t0.Add(time.Second), wA); got != 2 {
		t.Fatalf("after BlockRemoved of block 2, long before the TTL: %d, want 2", got)
	}
	if s := tb.Stats(); s.Killed != 1 {
		t.Fatalf("killed %d, want 1", s.Killed)
	}
}

func TestRemoveOfAnotherWorkerKillsNothing(t *testing.T) {
	tb := newTable(t, Config{})
	p := prompt(10, 3)
	tb.Record(wA, p, 0, t0)
	tb.Apply(stored(wA, p, 5000))
	tb.Apply(messages.RouterEvent{WorkerID: wB.Worker, Event: messages.KvCacheEvent{Kind: messages.KindRemoved,
		Removed: []messages.ExternalHash{5000}}})
	if got := overlapOf(tb, p, t0, wA); got != 3 {
		t.Fatalf("A after B's remove: %d, want 3", got)
	}
}

func TestClearKillsTheStreamsPredictions(t *testing.T) {
	tb := newTable(t, Config{})
	p := prompt(10, 3)
	tb.Record(wA, p, 0, t0)
	tb.Record(wB, p, 0, t0)
	tb.Apply(stored(wA, p[:1], 1))
	tb.Apply(messages.RouterEvent{WorkerID: wA.Worker, Event: messages.KvCacheEvent{Kind: messages.KindCleared}})
	if got := overlapOf(tb, p, t0, wA); got != 0 {
		t.Fatalf("A after AllBlocksCleared: %d, want 0", got)
	}
	if got := overlapOf(tb, p, t0, wB); got != 3 {
		t.Fatalf("B: %d, want 3", got)
	}
	if s := tb.Stats(); s.Killed != 3 || s.Blocks != 3 {
		t.Fatalf("stats %+v, want 3 killed, 3 left", s)
	}
}

func TestCapEvictsLeastRecentlyRoutedTailFirst(t *testing.T) {
	tb := newTable(t, Config{MaxBlocks: 4})
	tb.Record(wA, prompt(100, 3), 0, t0)
	tb.Record(wB, prompt(200, 2), 0, t0.Add(time.Millisecond))
	s := tb.Stats()
	if s.Blocks != 4 || s.Evicted != 1 {
		t.Fatalf("stats %+v, want 4 blocks, 1 evicted", s)
	}
	if got := overlapOf(tb, prompt(100, 3), t0, wA); got != 2 {
		t.Fatalf("A: %d, want 2 (its last block evicted, its prefix kept)", got)
	}
	tb.Record(wC, prompt(300, 9), 0, t0.Add(2*time.Millisecond)) // longer than the cap: its prefix only
	if got := overlapOf(tb, prompt(300, 9), t0, wC); got != 4 {
		t.Fatalf("C: %d, want 4", got)
	}
}

func TestPredictionsOff(t *testing.T) {
	tb := newTable(t, Config{TTL: Off})
	tb.Record(wA, prompt(1, 3), 0, t0)
	if tb.Stats().Blocks != 0 {
		t.Fatal("recorded with predictions off")
	}
	tb.SetEventLess(wB, 8)
	tb.Record(wB, prompt(1, 3), 0, t0)
	if got := overlapOf(tb, prompt(1, 3), t0, wB); got != 3 {
		t.Fatalf("event-less worker with predictions off: %d, want 3", got)
	}
}

func TestEventLessWorkerCapacityLRU(t *testing.T) {
	tb := newTable(t, Config{})
	tb.SetEventLess(wA, 6)
	sys := prompt(1000, 3) // a shared system prompt
	p1 := append(append([]messages.LocalHash{}, sys...), prompt(1100, 2)...)
	p2 := append(append([]messages.LocalHash{}, sys...), prompt(1200, 2)...)
	tb.Record(wA, p1, 0, t0)
	tb.Record(wA, p2, 0, t0.Add(time.Second))
	if n := tb.Len(wA); n != 6 {
		t.Fatalf("%d blocks, want the capacity 6", n)
	}
	if got := overlapOf(tb, p2, t0.Add(time.Second), wA); got != 5 {
		t.Fatalf("newest prompt: %d, want 5", got)
	}
	if got := overlapOf(tb, p1, t0.Add(time.Second), wA); got != 4 {
		t.Fatalf("older prompt: %d, want 4 (its last block evicted)", got)
	}
	if s := tb.Stats(); s.Evicted != 1 {
		t.Fatalf("evicted %d, want 1", s.Evicted)
	}
	tb.SetEventLess(wA, 2) // capacity lowered: evicts down to it
	if n := tb.Len(wA); n != 2 {
		t.Fatalf("after lowering the capacity: %d blocks, want 2", n)
	}
	if got := overlapOf(tb, sys, t0.Add(time.Second), wA); got != 2 {
		t.Fatalf("the shared prefix survives: %d, want 2", got)
	}
}

func TestEventLessWorkerHoldsOnlyWhatWasRouted(t *testing.T) {
	tb := newTable(t, Config{})
	tb.SetEventLess(wA, 100)
	tb.SetEventLess(wB, 100)
	p := prompt(1, 4)
	tb.Record(wA, p, 0, t0)
	for _, q := range [][]messages.LocalHash{prompt(20, 4), prompt(50, 1)} {
		if got := tb.Overlaps(q, t0, nil, nil); len(got) != 0 {
			t.Fatalf("never routed %v, predicted %v", q, got)
		}
	}
	if got := tb.Overlaps(p, t0, nil, nil); len(got) != 1 || got[0] != (Overlap{Key: wA, Blocks: 4}) {
		t.Fatalf("overlaps %v, want only A with 4", got)
	}
	if tb.Len(wB) != 0 {
		t.Fatal("B holds blocks it was never routed")
	}
	// Its blocks live DefaultEventLessTTL without another route.
	if got := overlapOf(tb, p, t0.Add(DefaultEventLessTTL-time.Nanosecond), wA); got != 4 {
		t.Fatalf("before the event-less TTL: %d, want 4", got)
	}
	tb.Record(wA, prompt(900, 1), 0, t0.Add(DefaultEventLessTTL))
	if n := tb.Len(wA); n != 1 {
		t.Fatalf("after the event-less TTL: %d blocks, want 1", n)
	}
}

func TestModeChangeAndDrop(t *testing.T) {
	tb := newTable(t, Config{})
	tb.SetEventLess(wA, 10)
	tb.Record(wA, prompt(1, 3), 0, t0)
	tb.SetEventLess(wA, -1) // now publishes events: its approximate cache is dropped
	if !tb.EventLess(wB) && tb.EventLess(wA) {
		t.Fatal("A still event-less")
	}
	if got := overlapOf(tb, prompt(1, 3), t0, wA); got != 0 {
		t.Fatalf("after the mode change: %d, want 0", got)
	}
	tb.Record(wA, prompt(1, 3), 0, t0)
	tb.Record(wC, prompt(1, 3), 0, t0)
	tb.DropWorker(wA.Worker)
	if got := tb.Overlaps(prompt(1, 3), t0, nil, nil); len(got) != 1 || got[0].Key != wC {
		t.Fatalf("after dropping A: %v, want C only", got)
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, c := range []Config{{TTL: -2}, {MaxBlocks: -1}, {EventLessTTL: -1}, {EventLessBlocks: MaxEventLessBlocks + 1}} {
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v: %v, want ErrInvalidConfig", c, err)
		}
	}
}

// Routing a prompt again onto a full list makes room without evicting its
// own blocks: exactly the new blocks' worth of others' is evicted.
func TestRecordAgainEvictsOnlyWhatItNeeds(t *testing.T) {
	tb := newTable(t, Config{})
	tb.SetEventLess(wA, 16)
	p, q := prompt(100, 10), prompt(200, 10)
	tb.Record(wA, p, 0, t0)
	tb.Record(wA, q, 0, t0) // evicts p's last 4
	tb.Record(wA, p, 0, t0) // p's 4 back: q's last 4 go
	if s := tb.Stats(); s.Evicted != 8 {
		t.Fatalf("evicted %d, want 8", s.Evicted)
	}
	if a, b := overlapOf(tb, p, t0, wA), overlapOf(tb, q, t0, wA); a != 10 || b != 6 {
		t.Fatalf("p %d, q %d, want 10 and 6", a, b)
	}
}

// A request naming one hash twice (block hashes sent by a client) predicts
// it once.
func TestRecordRepeatedHash(t *testing.T) {
	tb := newTable(t, Config{})
	tb.Record(wA, []messages.LocalHash{5, 6, 5, 7}, 0, t0)
	if s := tb.Stats(); s.Blocks != 3 {
		t.Fatalf("%d blocks, want 3", s.Blocks)
	}
	tb.Apply(stored(wA, []messages.LocalHash{5}, 1))
	tb.Apply(messages.RouterEvent{WorkerID: wA.Worker, Event: messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: []messages.ExternalHash{1}}})
	if s := tb.Stats(); s.Blocks != 2 || s.Killed != 1 {
		t.Fatalf("stats %+v, want 2 blocks, 1 killed", s)
	}
}

// A worker's confirmed overlap is continued by its predictions: a request
// whose first blocks the index confirms and whose next blocks were routed
// there scores both; blocks inside the confirmed prefix need no record.
func TestConfirmedPrefixContinuedByPredictions(t *testing.T) {
	tb := newTable(t, Config{})
	p := prompt(1, 10)
	tb.Record(wA, p, 6, t0) // the index held 6 blocks of p on A
	if s := tb.Stats(); s.Blocks != 5 {
		t.Fatalf("%d blocks recorded, want 5 (block 0 and blocks 6..9)", s.Blocks)
	}
	conf := func(c uint32) func(messages.WorkerKey) uint32 { return func(messages.WorkerKey) uint32 { return c } }
	if got := tb.Overlaps(p, t0, conf(6), nil); len(got) != 1 || got[0].Blocks != 10 {
		t.Fatalf("confirmed 6 + predicted 4: %v, want 10", got)
	}
	if got := tb.Overlaps(p, t0, conf(3), nil); len(got) != 1 || got[0].Blocks != 3 {
		t.Fatalf("the index lost blocks 3..5: %v, want 3 (the predictions do not bridge the gap)", got)
	}
}

// Waiting counts the requests routed with a block 0 that no event has
// confirmed yet on that worker: each sibling of a burst adds one, an
// event-less worker's never do (nothing will confirm them), and the
// BlockStored of block 0 sets it back to 0 for good.
func TestWaitingCountsRoutesUntilConfirmed(t *testing.T) {
	tb := newTable(t, Config{})
	tb.SetEventLess(wC, 100)
	p := prompt(1, 4)
	waiting := func(k messages.WorkerKey) uint32 {
		for _, o := range tb.Overlaps(p, t0, nil, nil) {
			if o.Key == k {
				return o.Waiting
			}
		}
		return 0
	}
	for range 3 {
		tb.Record(wA, p, 0, t0)
		tb.Record(wC, p, 0, t0)
	}
	tb.Record(wB, p, 0, t0)
	if a, b, c := waiting(wA), waiting(wB), waiting(wC); a != 3 || b != 1 || c != 0 {
		t.Fatalf("waiting A %d B %d C (event-less) %d, want 3 1 0", a, b, c)
	}
	tb.Apply(stored(wA, p[:1], 100))
	tb.Record(wA, p, 1, t0)
	if a, b := waiting(wA), waiting(wB); a != 0 || b != 1 {
		t.Fatalf("after A's BlockStored of block 0: waiting A %d B %d, want 0 1", a, b)
	}
}
