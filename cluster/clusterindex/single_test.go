package clusterindex

import (
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// TestOneMemberAnswersLikeOneTree (one member, so it runs under -race):
// every query through the shard grains equals one radix.Tree fed the same
// events, and the ordered reads see every batch sent before them.
func TestOneMemberAnswersLikeOneTree(t *testing.T) {
	ms := startMembers(t, "ci-one", NewNode(Config{}).Join)
	x := Spawn(ms[0], namespace, Config{Shards: 5, QueryDeadline: wait})
	defer x.Stop()
	if err := x.Create(wait); err != nil {
		t.Fatal(err)
	}
	plain := radix.New(radix.Config{})
	g := newStreams(11)
	for round := range 6 {
		for range 100 {
			ev := g.next(messages.WorkerID(g.rng.IntN(workers)))
			plain.Apply(ev)
			ms[0].Cluster.ActorSystem.Root.Send(x.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
		}
		if round == 3 {
			plain.RemoveWorker(4)
			x.RemoveWorker(4)
		}
		snap, err := x.Snapshot(wait)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Blocks) != len(plain.Workers()) {
			t.Fatalf("round %d: %d streams, want %d", round, len(snap.Blocks), len(plain.Workers()))
		}
		for _, k := range plain.Workers() {
			if !slices.Equal(snap.Blocks[k], plain.Blocks(k)) {
				t.Fatalf("round %d: stream %v holds %v, want %v", round, k, snap.Blocks[k], plain.Blocks(k))
			}
		}
		for range 10 {
			hashes := g.query()
			ans := x.Query(&indexer.QueryRequest{Hashes: hashes, Options: allOptions}, 0)
			if ans.Partial() {
				t.Fatalf("round %d: partial %+v", round, ans)
			}
			checkAnswer(t, "one member", ans, plain, hashes, x.Shards())
		}
	}
	dump, err := x.Dump(wait)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := radix.New(radix.Config{})
	for _, ev := range dump.Events {
		rebuilt.Apply(ev)
	}
	for _, k := range plain.Workers() {
		if !slices.Equal(rebuilt.Blocks(k), plain.Blocks(k)) {
			t.Fatalf("dump: stream %v rebuilds to %v, want %v", k, rebuilt.Blocks(k), plain.Blocks(k))
		}
	}
}

// TestSilentGrainsGiveMissingShardsWithinDeadline: grains that never
// answer cost the deadline, not a hang, and every shard is listed missing.
func TestSilentGrainsGiveMissingShardsWithinDeadline(t *testing.T) {
	ms := startMembers(t, "ci-mute", kind(cluster.NewKind(Kind, actor.PropsFromFunc(func(actor.Context) {}))))
	x := Spawn(ms[0], namespace, Config{Shards: 3})
	defer x.Stop()
	const deadline = 200 * time.Millisecond
	for range 3 {
		start := time.Now()
		ans := x.Query(&indexer.QueryRequest{Hashes: []messages.LocalHash{1, 2}}, deadline)
		if took := time.Since(start); took > deadline+2*time.Second {
			t.Fatalf("query took %v with a %v deadline", took, deadline)
		}
		if !slices.Equal(ans.Missing, []int{0, 1, 2}) || len(ans.Scores) != 0 || !ans.Partial() {
			t.Fatalf("answer %+v, want every shard missing", ans)
		}
	}
	if _, err := x.Stats(deadline); err == nil {
		t.Fatal("Stats with silent shards: no error")
	}
}
