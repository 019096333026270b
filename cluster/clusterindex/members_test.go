//go:build !race

// Several members in one process trip three data races inside
// protoactor-go (this version), none in kvrouter: the gossip informer's
// package-level math/rand (avoided: the fixture sets GossipInterval past
// the test), grpclog.SetLoggerV2 written by every Remote.Start while
// another member's gRPC server reads it, and endpointManager.stop racing
// removeEndpoint at shutdown. In production a process hosts one member,
// so these tests run without -race; single_test.go runs one member under
// -race.

package clusterindex

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// TestClusterIndex runs three members with the in-memory provider: events
// sent through any member land on their worker's grain; every member
// answers like one radix.Tree fed the same events. (A member leaving:
// rebuild_test.go.)
func TestClusterIndex(t *testing.T) {
	t.Parallel()
	ms := startMembers(t, "ci-three", NewNode(Config{}).Join, NewNode(Config{}).Join, NewNode(Config{}).Join)
	cfg := Config{Shards: 6, QueryDeadline: wait}
	idx := make([]*Index, len(ms))
	for i, m := range ms {
		idx[i] = Spawn(m, namespace, cfg)
	}
	if err := idx[0].Create(wait); err != nil {
		t.Fatal(err)
	}
	plain := radix.New(radix.Config{})
	g := newStreams(3)
	for range 600 {
		w := messages.WorkerID(g.rng.IntN(workers))
		ev := g.next(w)
		plain.Apply(ev)
		// Each worker ingests through one member (its order is kept).
		ms[int(w)%len(ms)].Cluster.ActorSystem.Root.Send(idx[int(w)%len(ms)].PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
	}
	for _, x := range idx { // a barrier: each member's batches are applied
		if _, err := x.Stats(wait); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("each batch lands on its worker's grain", func(t *testing.T) {
		for shard := range cfg.Shards {
			res, err := ms[1].Cluster.Request(Identity(namespace, shard), Kind, &clusterpb.SnapshotRequest{})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := clusterpb.ToSnapshot(res.(*clusterpb.Snapshot))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range plain.Workers() {
				if indexer.ShardOf(k.Worker, cfg.Shards) != shard {
					if _, ok := snap.Blocks[k]; ok {
						t.Fatalf("shard %d holds stream %v of shard %d", shard, k, indexer.ShardOf(k.Worker, cfg.Shards))
					}
				} else if !slices.Equal(snap.Blocks[k], plain.Blocks(k)) {
					t.Fatalf("shard %d: stream %v holds %v, want %v", shard, k, snap.Blocks[k], plain.Blocks(k))
				}
			}
		}
		st, err := idx[2].Stats(wait)
		if err != nil {
			t.Fatal(err)
		}
		if want := plain.Size(); st.Size.Entries != want.Entries || st.Size.Streams != want.Streams || len(st.Shards) != cfg.Shards {
			t.Fatalf("stats size %+v (%d shards), want entries/streams of %+v", st.Size, len(st.Shards), want)
		}
	})

	t.Run("every member answers like one tree", func(t *testing.T) {
		for range 40 {
			q := g.query()
			for i, x := range idx {
				ans := x.Query(&indexer.QueryRequest{Hashes: q, Options: allOptions}, 0)
				if ans.Partial() {
					t.Fatalf("member %d: partial answer %+v", i, ans)
				}
				checkAnswer(t, ms[i].Address(), ans, plain, q, cfg.Shards)
			}
		}
	})
}

// TestSilentShardMakesAnswerPartial: the shards placed on a member whose
// grains never answer are listed missing once the deadline passes, and
// the answer from the others comes back.
func TestSilentShardMakesAnswerPartial(t *testing.T) {
	t.Parallel()
	silent := cluster.NewKind(Kind, actor.PropsFromFunc(func(actor.Context) {}))
	// The silent member never answers the live grains' first census round:
	// they stop waiting for it after HandoverWait.
	ms := startMembers(t, "ci-silent", NewNode(Config{HandoverWait: 200 * time.Millisecond}).Join, kind(silent))
	x := Spawn(ms[0], namespace, Config{Shards: 8})
	// The test needs shards on both members: wait until this member's view
	// of the topology includes the other (it may join a moment later).
	eventually.True(t, "shards placed on both members", func() (bool, string) {
		mine := 0
		for shard := range x.Shards() {
			if x.Owner(shard) == ms[0].Address() {
				mine++
			}
		}
		return mine > 0 && mine < x.Shards(), fmt.Sprintf("%d of %d shards on this member", mine, x.Shards())
	})
	ev := messages.RouterEvent{WorkerID: 0, Event: messages.KvCacheEvent{EventID: 1, Kind: messages.KindStored,
		Blocks: []messages.StoredBlock{{BlockHash: 11, TokensHash: 22}}}}
	for w := range messages.WorkerID(16) {
		ev.WorkerID = w
		ms[0].Cluster.ActorSystem.Root.Send(x.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
	}
	// Seed marks the live shards complete, ordered after the batches.
	var live, dead []int
	for shard := range x.Shards() {
		if x.Owner(shard) == ms[0].Address() {
			live = append(live, shard)
			if _, err := x.Seed(shard, nil, nil, true, wait); err != nil {
				t.Fatal(err)
			}
		} else {
			dead = append(dead, shard)
		}
	}
	if len(live) == 0 || len(dead) == 0 {
		t.Fatalf("placement live %v, silent %v: the test needs both", live, dead)
	}
	const deadline = 300 * time.Millisecond
	for range 3 {
		start := time.Now()
		ans := x.Query(&indexer.QueryRequest{Hashes: []messages.LocalHash{22}}, deadline)
		if took := time.Since(start); took > deadline+2*time.Second {
			t.Fatalf("query took %v with a %v deadline", took, deadline)
		}
		if !slices.Equal(ans.Missing, dead) || len(ans.Recovering) != 0 {
			t.Fatalf("missing %v recovering %v, want missing %v", ans.Missing, ans.Recovering, dead)
		}
		for _, s := range ans.Scores {
			if !slices.Contains(live, indexer.ShardOf(s.Key.Worker, x.Shards())) || s.Blocks != 1 {
				t.Fatalf("score %+v", s)
			}
		}
		want := 0
		for w := range messages.WorkerID(16) {
			if slices.Contains(live, indexer.ShardOf(w, x.Shards())) {
				want++
			}
		}
		if len(ans.Scores) != want {
			t.Fatalf("%d scores from live shards %v, want %d", len(ans.Scores), live, want)
		}
	}
}

// TestTracesCrossTwoHosts: with two members the shard grains are spread
// over both, so the query's lookups and the batch's apply run on the other
// member too, their trace context carried in the protobuf messages. Not
// parallel: checkTraces installs the process's tracer provider, which
// would record the spans of the package's other tests running meanwhile.
func TestTracesCrossTwoHosts(t *testing.T) {
	checkTraces(t, startMembers(t, "ci-trace-two", NewNode(Config{}).Join, NewNode(Config{}).Join))
}
