package indexer

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// wait bounds each answer the tests ask the index for: a loaded machine
// under -race takes seconds for what takes microseconds alone.
const wait = time.Minute

// workload generates random, valid event streams for a few workers over a
// small tree of token paths, so workers share prefixes: a block's local
// hash depends on its path only, its engine hash on the worker too.
type workload struct {
	rng  *rand.Rand
	held map[messages.WorkerID][]path // blocks each worker holds
	ids  map[messages.WorkerID]uint64 // last event id per worker
}

type path []uint8 // token choice per depth

func (p path) local() messages.LocalHash {
	h := uint64(0x9e3779b97f4a7c15)
	for _, c := range p {
		h = (h ^ uint64(c+1)) * 0xbf58476d1ce4e5b9
	}
	return messages.LocalHash(h)
}

func (p path) engine(w messages.WorkerID) messages.ExternalHash {
	return messages.ExternalHash(uint64(p.local())*31 + uint64(w)*0x94d049bb133111eb)
}

func (g *workload) next(workers int) messages.RouterEvent {
	w := messages.WorkerID(g.rng.IntN(workers))
	g.ids[w]++
	ev := messages.RouterEvent{WorkerID: w, Event: messages.KvCacheEvent{EventID: g.ids[w]}}
	held := g.held[w]
	switch r := g.rng.IntN(20); {
	case r == 0:
		ev.Event.Kind = messages.KindCleared
		g.held[w] = nil
	case r < 6 && len(held) > 0:
		p := held[g.rng.IntN(len(held))]
		ev.Event.Kind = messages.KindRemoved
		ev.Event.Removed = []messages.ExternalHash{p.engine(w)}
		g.held[w] = slices.DeleteFunc(held, func(q path) bool { return len(q) >= len(p) && slices.Equal(q[:len(p)], p) })
	default:
		var parent path
		if len(held) > 0 && g.rng.IntN(3) > 0 {
			parent = held[g.rng.IntN(len(held))]
			ev.Event.HasParent, ev.Event.ParentHash = true, parent.engine(w)
		}
		ev.Event.Kind = messages.KindStored
		for range 1 + g.rng.IntN(3) {
			parent = append(slices.Clone(parent), uint8(g.rng.IntN(3)))
			ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: parent.engine(w), TokensHash: parent.local()})
			if !slices.ContainsFunc(g.held[w], func(q path) bool { return slices.Equal(q, parent) }) {
				g.held[w] = append(g.held[w], parent)
			}
		}
	}
	return ev
}

func (g *workload) query() []messages.LocalHash {
	var p path
	var q []messages.LocalHash
	for range 1 + g.rng.IntN(7) {
		p = append(p, uint8(g.rng.IntN(3)))
		q = append(q, p.local())
	}
	return q
}

func canonical(r *QueryResult) *QueryResult {
	s := slices.Clone(r.Scores)
	slices.SortFunc(s, func(a, b radix.Score) int {
		if c := cmp.Compare(b.Blocks, a.Blocks); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Key.Worker, b.Key.Worker); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.DpRank, b.Key.DpRank)
	})
	return &QueryResult{Scores: s, Frequencies: r.Frequencies}
}

func sameAnswer(a, b *QueryResult) bool {
	a, b = canonical(a), canonical(b)
	return slices.Equal(a.Scores, b.Scores) && slices.Equal(a.Frequencies, b.Frequencies)
}

// TestShardCountInvariance feeds the same random event streams to a plain
// radix.Tree and to indexes of 1, 3 and 5 shard actors; every query must
// get the same answer from all of them, and their snapshots and sizes must
// agree.
func TestShardCountInvariance(t *testing.T) {
	system := actor.NewActorSystem()
	opt := radix.MatchOptions{Frequencies: true, TreeSizes: true, Tiers: true}
	for seed := range uint64(20) {
		g := &workload{rng: rand.New(rand.NewPCG(seed, 7)), held: map[messages.WorkerID][]path{}, ids: map[messages.WorkerID]uint64{}}
		plain := radix.New(radix.Config{})
		counts := []int{1, 3, 5}
		idx := make([]*Index, len(counts))
		for i, n := range counts {
			idx[i] = Spawn(system.Root, Config{Shards: n})
		}
		workers := 2 + int(seed%7)
		var stored uint64 // blocks of the stored events sent
		for round := range 30 {
			for range 20 {
				ev := g.next(workers)
				plain.Apply(ev)
				if ev.Event.Kind == messages.KindStored {
					stored += uint64(len(ev.Event.Blocks))
				}
				for _, x := range idx {
					system.Root.Send(x.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
				}
			}
			if round == 15 {
				w := messages.WorkerID(g.rng.IntN(workers))
				plain.RemoveWorker(w)
				delete(g.held, w)
				for _, x := range idx {
					x.RemoveWorker(w)
				}
			}
			for _, x := range idx {
				if _, err := x.Stats(wait); err != nil { // a barrier: the batches are applied
					t.Fatal(err)
				}
			}
			for range 10 {
				q := g.query()
				var want radix.Overlap
				plain.FindMatches(q, opt, &want)
				wantRes := &QueryResult{Scores: want.Scores, Frequencies: want.Frequencies}
				for i, x := range idx {
					got, err := x.Query(&QueryRequest{Hashes: q, Options: opt}, wait)
					if err != nil {
						t.Fatal(err)
					}
					if !sameAnswer(got, wantRes) {
						t.Fatalf("seed %d round %d, %d shards: %+v, want %+v", seed, round, counts[i], canonical(got), canonical(wantRes))
					}
				}
			}
		}
		want := plain.Size()
		for i, x := range idx {
			st, err := x.Stats(wait)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size.Entries != want.Entries || st.Size.Streams != want.Streams || len(st.Shards) != counts[i] {
				t.Fatalf("seed %d, %d shards: size %+v, want entries/streams of %+v", seed, counts[i], st.Size, want)
			}
			var perShard uint64
			for _, n := range st.ShardStoredBlocks {
				perShard += n
			}
			if st.StoredBlocks != stored || perShard != stored || len(st.ShardStoredBlocks) != counts[i] {
				t.Fatalf("seed %d, %d shards: stored blocks %d (per shard %v), want %d", seed, counts[i], st.StoredBlocks, st.ShardStoredBlocks, stored)
			}
			snap, err := x.Snapshot(wait)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range plain.Workers() {
				if !slices.Equal(snap.Blocks[k], plain.Blocks(k)) {
					t.Fatalf("seed %d, %d shards: stream %v holds %v, want %v", seed, counts[i], k, snap.Blocks[k], plain.Blocks(k))
				}
			}
			x.Stop()
		}
	}
}

// TestDumpReplaysIntoAnyShardCount rebuilds a 4-shard index from a 2-shard
// index's dump and checks they answer alike.
func TestDumpReplaysIntoAnyShardCount(t *testing.T) {
	system := actor.NewActorSystem()
	g := &workload{rng: rand.New(rand.NewPCG(99, 1)), held: map[messages.WorkerID][]path{}, ids: map[messages.WorkerID]uint64{}}
	src, dst := Spawn(system.Root, Config{Shards: 2}), Spawn(system.Root, Config{Shards: 4})
	defer src.Stop()
	defer dst.Stop()
	for range 400 {
		system.Root.Send(src.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{g.next(6)}})
	}
	dump, err := src.Dump(wait)
	if err != nil {
		t.Fatal(err)
	}
	if len(dump.Events) == 0 {
		t.Fatal("empty dump")
	}
	for _, ev := range dump.Events {
		system.Root.Send(dst.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
	}
	a, _ := src.Snapshot(wait)
	b, err := dst.Snapshot(wait)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Blocks) == 0 || len(a.Blocks) != len(b.Blocks) {
		t.Fatalf("streams: %d vs %d", len(a.Blocks), len(b.Blocks))
	}
	for k, blocks := range a.Blocks {
		if !slices.Equal(blocks, b.Blocks[k]) {
			t.Fatalf("stream %v: %v vs %v", k, blocks, b.Blocks[k])
		}
	}
}

// TestFollowersSeeEveryBatchInOrder checks the front hands batches, clears
// included, to the followers in the order it got them, and skips empty
// ones.
func TestFollowersSeeEveryBatchInOrder(t *testing.T) {
	system := actor.NewActorSystem()
	follower, got := collector[*messages.RouterEventBatch](system)
	x := Spawn(system.Root, Config{Shards: 3}, nil, follower)
	defer x.Stop()
	k := messages.WorkerKey{Worker: 4}
	sent := []*messages.RouterEventBatch{
		{Events: []messages.RouterEvent{{WorkerID: 4, Event: messages.KvCacheEvent{EventID: 1, Kind: messages.KindStored,
			Blocks: []messages.StoredBlock{{BlockHash: 1, TokensHash: 2}}}}}},
		{},
		{Clear: []messages.WorkerKey{k}},
	}
	for _, b := range sent {
		system.Root.Send(x.PID(), b)
	}
	for _, want := range []*messages.RouterEventBatch{sent[0], sent[2]} {
		select {
		case b := <-got:
			if b != want {
				t.Fatalf("follower got %+v, want %+v", b, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("follower got nothing")
		}
	}
	snap, err := x.Snapshot(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Blocks[k]) != 0 {
		t.Fatalf("the clear reached the shard after the store: %v", snap.Blocks)
	}
}

// collector spawns an actor that hands every message of type T it gets to
// the channel returned.
func collector[T any](system *actor.ActorSystem) (*actor.PID, chan T) {
	got := make(chan T, 64)
	return system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(T); ok {
			got <- m
		}
	})), got
}
