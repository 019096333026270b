package clusterpb

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
	"google.golang.org/protobuf/proto"
)

// gen makes random plain values. Empty slices and maps are generated the
// way the conversions return them (nil slices, non-nil maps), so a round
// trip must give back a deeply equal value. Every number takes values
// from the edges of its type too.
type gen struct{ rng *rand.Rand }

func (g gen) u64() uint64 {
	switch g.rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return ^uint64(0) - uint64(g.rng.IntN(2))
	}
	return g.rng.Uint64()
}

func (g gen) n(max int) int { return g.rng.IntN(max + 1) }

func slice[T any](g gen, max int, f func() T) []T {
	n := g.n(max)
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

func (g gen) key() messages.WorkerKey {
	return messages.WorkerKey{Worker: messages.WorkerID(g.u64()), DpRank: messages.DpRank(g.u64())}
}

func (g gen) str() string {
	if g.rng.IntN(3) == 0 {
		return ""
	}
	b := make([]byte, 1+g.n(12))
	for i := range b {
		b[i] = byte(g.rng.IntN(256)) // not UTF-8 in general
	}
	return string(b)
}

func (g gen) event() messages.RouterEvent {
	ext := func() messages.ExternalHash { return messages.ExternalHash(g.u64()) }
	return messages.RouterEvent{
		WorkerID:    messages.WorkerID(g.u64()),
		StorageTier: messages.StorageTier(g.rng.IntN(256)),
		SessionID:   g.str(),
		Event: messages.KvCacheEvent{
			EventID: g.u64(), DpRank: messages.DpRank(g.u64()), Kind: messages.EventKind(g.rng.IntN(256)),
			HasParent: g.rng.IntN(2) == 0, ParentHash: ext(),
			Blocks: slice(g, 5, func() messages.StoredBlock {
				return messages.StoredBlock{BlockHash: ext(), TokensHash: messages.LocalHash(g.u64())}
			}),
			Removed: slice(g, 4, ext), Offloaded: slice(g, 4, ext),
		},
	}
}

func (g gen) batch() *messages.RouterEventBatch {
	b := &messages.RouterEventBatch{Clear: slice(g, 3, g.key), Events: slice(g, 6, g.event)}
	if g.rng.IntN(3) > 0 {
		b.Position = g.position()
	}
	b.Trace = g.trace()
	return b
}

// trace is a random trace context, zero half the time.
func (g gen) trace() messages.TraceContext {
	var tc messages.TraceContext
	if g.rng.IntN(2) == 0 {
		for i := range tc.TraceID {
			tc.TraceID[i] = byte(g.rng.IntN(256))
		}
		tc.SpanID[g.rng.IntN(8)] = byte(1 + g.rng.IntN(255))
		tc.Flags = byte(g.rng.IntN(256))
	}
	return tc
}

func (g gen) position() messages.Position {
	return messages.Position{Stream: messages.StreamID(g.key()), Seq: g.u64(), Exact: g.n(1) == 0, Known: g.n(1) == 0}
}

func (g gen) size() radix.Size {
	return radix.Size{Blocks: g.rng.Int(), Entries: g.rng.Int(), Detached: g.n(1 << 20), Streams: g.n(1 << 20)}
}

func (g gen) radixStats() radix.Stats {
	s := radix.Stats{Events: g.u64()}
	if g.rng.IntN(2) == 0 {
		for i := range s.Counts {
			s.Counts[i] = g.u64()
		}
	}
	return s
}

// wire sends p through protobuf's encoding, as a remote envelope does.
func wire[T proto.Message](t *testing.T, p T) T {
	t.Helper()
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	out := p.ProtoReflect().New().Interface().(T)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func check[T any](t *testing.T, i int, what string, want, got T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s %d: %v", what, i, err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%s %d: round trip\n got %+v\nwant %+v", what, i, got, want)
	}
}

// TestRoundTrip: plain → proto → bytes → proto → plain is the identity
// for every message that crosses hosts, over random values.
func TestRoundTrip(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(5, 5))}
	for i := range 2000 {
		b := g.batch()
		got, err := ToBatch(wire(t, FromBatch(b)))
		check(t, i, "batch", b, got, err)

		q := &indexer.QueryRequest{Hashes: slice(g, 8, func() messages.LocalHash { return messages.LocalHash(g.u64()) }),
			Options: radix.MatchOptions{EarlyExit: g.n(1) == 0, Frequencies: g.n(1) == 0, TreeSizes: g.n(1) == 0, Tiers: g.n(1) == 0},
			Trace:   g.trace()}
		check(t, i, "query", q, ToQuery(wire(t, FromQuery(q))), nil)

		r := &indexer.QueryResult{
			Scores: slice(g, 5, func() radix.Score {
				s := radix.Score{Key: g.key(), Blocks: uint32(g.u64()), TreeSize: uint32(g.u64())}
				if g.n(1) == 0 {
					for j := range s.Tiers {
						s.Tiers[j] = uint32(g.u64())
					}
				}
				return s
			}),
			Frequencies: slice(g, 6, func() uint32 { return uint32(g.u64()) }),
		}
		gotR, err := ToQueryResult(wire(t, FromQueryResult(r)))
		check(t, i, "query result", r, gotR, err)

		st := &indexer.Stats{Tree: g.radixStats(), Size: g.size(), TreeSizes: map[messages.WorkerKey]int{}, Shards: slice(g, 3, g.size)}
		for range g.n(4) {
			st.TreeSizes[g.key()] = g.rng.Int()
		}
		gotS, err := ToStats(wire(t, FromStats(st)))
		check(t, i, "stats", st, gotS, err)

		snap := &indexer.Snapshot{Stats: g.radixStats(), Size: g.size(), Blocks: map[messages.WorkerKey][]messages.ExternalHash{}}
		for range g.n(4) {
			snap.Blocks[g.key()] = append(slice(g, 4, func() messages.ExternalHash { return messages.ExternalHash(g.u64()) }), 1)
		}
		gotSnap, err := ToSnapshot(wire(t, FromSnapshot(snap)))
		check(t, i, "snapshot", snap, gotSnap, err)

		d := &indexer.DumpResult{Events: slice(g, 4, g.event), Positions: slice(g, 3, g.position)}
		gotD, err := ToDump(wire(t, FromDump(d)))
		check(t, i, "dump", d, gotD, err)
	}
}

// TestMalformedIsRefused: values that do not fit the plain types are
// refused with ErrMalformed, never truncated.
func TestMalformedIsRefused(t *testing.T) {
	ev := func(mod func(*RouterEvent)) *RouterEventBatch {
		e := &RouterEvent{Event: &KvCacheEvent{Kind: EventKind_EVENT_KIND_STORED, BlockHashes: []uint64{1}, TokensHashes: []uint64{2}}}
		mod(e)
		return &RouterEventBatch{Events: []*RouterEvent{e}}
	}
	cases := map[string]func() error{
		"block arrays differ": func() error {
			_, err := ToBatch(ev(func(e *RouterEvent) { e.Event.TokensHashes = nil }))
			return err
		},
		"kind beyond uint8": func() error {
			_, err := ToBatch(ev(func(e *RouterEvent) { e.Event.Kind = 256 }))
			return err
		},
		"negative tier": func() error {
			_, err := ToBatch(ev(func(e *RouterEvent) { e.StorageTier = -1 }))
			return err
		},
		"short trace id": func() error {
			_, err := ToBatch(&RouterEventBatch{Trace: &TraceContext{TraceId: []byte{1}, SpanId: make([]byte, 8)}})
			return err
		},
		"five tiers": func() error {
			_, err := ToQueryResult(&QueryResult{Scores: []*Score{{Tiers: make([]uint32, 5)}}})
			return err
		},
		"too many reasons": func() error {
			_, err := ToStats(&Stats{Tree: &RadixStats{Counts: make([]uint64, radix.ReasonCount+1)}})
			return err
		},
		"dump event": func() error {
			_, err := ToDump(&DumpResult{Events: ev(func(e *RouterEvent) { e.Event.BlockHashes = nil }).Events})
			return err
		},
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	// Absent sub-messages are empty values, not errors.
	if b, err := ToBatch(&RouterEventBatch{Events: []*RouterEvent{{}}}); err != nil || len(b.Events) != 1 {
		t.Fatalf("empty event: %+v, %v", b, err)
	}
}

// A query whose trace context is malformed is answered untraced, not
// refused.
func TestQueryWithMalformedTraceIsKept(t *testing.T) {
	q := ToQuery(&QueryRequest{Hashes: []uint64{1, 2}, Trace: &TraceContext{TraceId: []byte{1}, SpanId: []byte{2}}})
	if len(q.Hashes) != 2 || q.Trace != (messages.TraceContext{}) {
		t.Fatalf("query %+v, want its hashes and no trace", q)
	}
}
