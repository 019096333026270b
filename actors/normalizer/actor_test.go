package normalizer

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// spawnPool starts a normalizer actor whose NormalizedBatches arrive on got.
func spawnPool() (system *actor.ActorSystem, pool *actor.PID, got chan *messages.NormalizedBatch) {
	system = actor.NewActorSystem()
	got = make(chan *messages.NormalizedBatch, 8)
	next := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if b, ok := ctx.Message().(*messages.NormalizedBatch); ok {
			got <- b
		}
	}))
	return system, system.Root.Spawn(Props(next, wire.DefaultLimits())), got
}

// TestLostEventsDropTheStream checks that a batch the index cannot fully
// apply — an unreadable payload, a truncated batch, an event rejected for a
// reason that loses history — reaches the coalescer with a resync that
// drops the stream's state and leaves it degraded, while a clean batch and
// events rejected by design pass without one.
func TestLostEventsDropTheStream(t *testing.T) {
	system, pool, got := spawnPool()
	stored := func(b *wirefix.B) *wirefix.B {
		return b.Array(5).Str("BlockStored").Array(1).Uint(7, 0).Nil().Tokens(1, 2, 3, 4).Uint(4, 0)
	}
	clean := stored(wirefix.New().Batch(1, 1)).Nil().Bytes()
	unknownTag := wirefix.New().Batch(1, 1).Array(1).Str("LoadStat").Nil().Bytes()
	truncated := clean[:len(clean)-3]
	badHash := wirefix.New().Batch(1, 1).Array(4).Str("BlockRemoved").Array(1).Str("x").Nil().Nil().Nil().Bytes()
	cases := []struct {
		name    string
		payload []byte
		resync  messages.Resync
		want    messages.Resync
	}{
		{"clean", clean, messages.Resync{}, messages.Resync{}},
		{"rejected by design", unknownTag, messages.Resync{}, messages.Resync{}},
		{"not msgpack", []byte("garbage"), messages.Resync{}, messages.Resync{Reason: "events_lost"}},
		{"truncated", truncated, messages.Resync{}, messages.Resync{Reason: "events_lost"}},
		{"malformed remove", badHash, messages.Resync{}, messages.Resync{Reason: "events_lost"}},
		{"an exact start loses its exactness", badHash, messages.Resync{Reason: "start", Exact: true}, messages.Resync{Reason: "start"}},
		{"a resume is not kept", badHash, messages.Resync{Reason: "resumed", Exact: true, Keep: true}, messages.Resync{Reason: "events_lost"}},
	}
	for i, tc := range cases {
		system.Root.Send(pool, &messages.EngineBatch{Stream: messages.StreamID{Worker: 1}, Engine: "vllm",
			Seq: uint64(i), Payload: tc.payload, Resync: tc.resync})
		select {
		case b := <-got:
			if b.Resync != tc.want {
				t.Errorf("%s: resync %+v, want %+v", tc.name, b.Resync, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no batch", tc.name)
		}
	}
}

// TestBadHintKeepsTheBlocks checks that a stored event whose session id is
// unusable (100 kB, 25× the string cap; or not a string) reaches the
// coalescer with its blocks, unattributed, without a resync — the stream
// stays exact — and that the dropped hint is counted.
func TestBadHintKeepsTheBlocks(t *testing.T) {
	system, pool, got := spawnPool()
	stream := messages.StreamID{Worker: 3}
	storedWith := func(session func(*wirefix.B)) []byte {
		b := wirefix.New().Batch(1, 1).Map(5).Str("type").Str("BlockStored").Str("block_hashes").Array(2).Uint(7, 0).Uint(8, 0).
			Str("token_ids").Tokens(1, 2, 3, 4, 5, 6, 7, 8).Str("block_size").Uint(4, 0).Str("session_id")
		session(b)
		return b.Nil().Bytes()
	}
	payloads := [][]byte{
		storedWith(func(b *wirefix.B) { b.Str(strings.Repeat("s", 100_000)) }),
		storedWith(func(b *wirefix.B) { b.Array(1).Uint(1, 0) }),
	}
	for i, p := range payloads {
		system.Root.Send(pool, &messages.EngineBatch{Stream: stream, Engine: "vllm", Seq: uint64(i), Payload: p,
			Resync: messages.Resync{Reason: "resumed", Exact: true, Keep: true}})
		select {
		case b := <-got:
			if b.Lost || b.Resync.Reason != "resumed" || !b.Resync.Exact {
				t.Errorf("payload %d: lost %v resync %+v, want the stream kept exact", i, b.Lost, b.Resync)
			}
			if len(b.Events) != 1 || len(b.Events[0].Event.Blocks) != 2 || b.Events[0].SessionID != "" {
				t.Fatalf("payload %d: events %+v, want one unattributed event of 2 blocks", i, b.Events)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("payload %d: no batch", i)
		}
	}
	res, err := system.Root.RequestFuture(pool, &StatsRequest{Stream: stream}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	st := res.(*PoolStats)
	if n := st.Stream.DroppedHints[wire.HintSessionID]; n != 2 {
		t.Errorf("dropped session ids = %d, want 2", n)
	}
	if st.StreamHistoryLost != 0 || st.Stream.Blocks != 4 {
		t.Errorf("history lost %d, blocks %d; want 0 and 4", st.StreamHistoryLost, st.Stream.Blocks)
	}
}

// Of keeps every dp rank of a worker on one actor of the pool and spreads
// workers over all of them.
func TestOfKeepsAWorkerOnOneActor(t *testing.T) {
	const n = 3
	used := map[int]bool{}
	for w := messages.WorkerID(1); w <= 30; w++ {
		i := Of(messages.StreamID{Worker: w}, n)
		if i < 0 || i >= n {
			t.Fatalf("worker %d: actor %d of %d", w, i, n)
		}
		for r := messages.DpRank(1); r < 4; r++ {
			if j := Of(messages.StreamID{Worker: w, DpRank: r}, n); j != i {
				t.Fatalf("worker %d: rank %d on actor %d, rank 0 on %d", w, r, j, i)
			}
		}
		used[i] = true
	}
	if len(used) != n {
		t.Errorf("30 workers used %d of %d actors", len(used), n)
	}
}
