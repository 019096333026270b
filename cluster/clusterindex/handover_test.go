//go:build !race

// Several members in one process: see members_test.go for why not -race.

package clusterindex

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// TestJoinHandsSlicesOver: two members hold the index, each feeding half
// the workers (stand-in listeners that count rebuild requests); a third
// member joins while batches keep coming. The shards placed on it are
// handed over: once every member sees it, they answer complete (not
// recovering, no gap), loaded from a hand-over, no listener was asked to
// rebuild, and every member answers like one radix.Tree fed the same
// events — the batches sent during the move included.
func TestJoinHandsSlicesOver(t *testing.T) {
	t.Parallel()
	const shards = 16
	cfg := Config{Shards: shards, QueryDeadline: wait}
	agent := test.NewInMemAgent()
	nodes := []*Node{NewNode(cfg), NewNode(cfg), NewNode(cfg)}
	ms := startMembersWith(t, agent, "ci-join", nodes[0].Join, nodes[1].Join)

	var rebuilds atomic.Int64
	idx := make([]*Index, 2)
	for i, m := range ms {
		root := m.Cluster.ActorSystem.Root
		standIn := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if r, ok := c.Message().(*listener.Rebuild); ok {
				rebuilds.Add(1)
				c.Respond(&listener.Rebuilt{Tag: r.Tag, Exact: true})
			}
		}))
		fed := map[messages.StreamID]*actor.PID{}
		for w := range messages.WorkerID(workers) {
			if int(w)%2 == i {
				fed[messages.StreamID{Worker: w}] = standIn
			}
		}
		p := nodes[i].NewIndex(pipeline.IndexEnv{Root: root, Namespace: namespace,
			Listeners: func() map[messages.StreamID]*actor.PID { return fed }}).(*PipelineIndex)
		t.Cleanup(p.Stop)
		idx[i] = p.Index()
	}
	if err := idx[0].Create(wait); err != nil {
		t.Fatal(err)
	}

	plain := radix.New(radix.Config{})
	g := newStreams(5)
	send := func() {
		w := messages.WorkerID(g.rng.IntN(workers))
		ev := g.next(w)
		plain.Apply(ev)
		ms[int(w)%2].Cluster.ActorSystem.Root.Send(idx[int(w)%2].PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
	}
	for range 400 {
		send()
	}
	barrier(t, idx...)
	// A namespace's first activations may ask for rebuilds before Create's
	// seed reaches them (a known gap): only the move's count.
	rebuildsBefore := rebuilds.Load()
	for s := range shards {
		if st := shardStatus(t, ms[0], s); st.GetRecovering() {
			t.Fatalf("shard %d recovering before the join: %v", s, st)
		}
	}
	before := map[int]string{}
	for s := range shards {
		before[s] = idx[0].Owner(s)
	}

	// Batches keep coming while the third member joins.
	stop := make(chan struct{})
	var sender sync.WaitGroup
	var sent atomic.Int64
	sender.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				send()
				sent.Add(1)
				// Not a wait: the pace of the simulated traffic, a batch
				// every half millisecond, so the join happens mid-stream.
				time.Sleep(500 * time.Microsecond)
			}
		}
	})
	quiet := ms[0].Cluster.ActorSystem.Logger()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	third, err := nodes[2].Join(system, member.Config{Name: "ci-join", Provider: member.ProviderTest, TestAgent: agent,
		GossipInterval: time.Hour})
	if err != nil {
		close(stop)
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(third) })
	ms = append(ms, third)
	waitFor(t, "every member sees the third", func() bool {
		for _, m := range ms {
			if tp := m.Topology(); tp == nil || len(tp.Members) != 3 {
				return false
			}
		}
		return true
	})
	afterMove := sent.Load()
	eventually.True(t, "more batches after the move", func() (bool, string) {
		n := sent.Load() - afterMove
		return n >= 200, fmt.Sprint(n, " sent")
	})
	close(stop)
	sender.Wait()
	idx = append(idx, Spawn(third, namespace, cfg))
	t.Cleanup(idx[2].Stop)
	barrier(t, idx...)

	var moved []int
	for s := range shards {
		if o := idx[0].Owner(s); o == third.Address() {
			moved = append(moved, s)
		} else if o != before[s] {
			t.Fatalf("shard %d moved from %s to %s, not to the joining member", s, before[s], o)
		}
	}
	if len(moved) == 0 {
		t.Fatalf("no shard of %d placed on the joining member", shards)
	}
	for _, s := range moved {
		if st := shardStatus(t, third, s); !st.GetHandedOver() || st.GetRecovering() || st.GetGaps() != 0 {
			t.Fatalf("moved shard %d: status %v, want handed over, complete, no gap", s, st)
		}
	}
	if n := rebuilds.Load() - rebuildsBefore; n != 0 {
		t.Fatalf("listeners asked to rebuild %d times during the move, want none", n)
	}
	for i, x := range idx {
		snap, err := x.Snapshot(wait)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range plain.Workers() {
			if !slices.Equal(snap.Blocks[k], plain.Blocks(k)) {
				t.Fatalf("member %d: stream %v holds %v, want %v", i, k, snap.Blocks[k], plain.Blocks(k))
			}
		}
		if len(snap.Blocks) != len(plain.Workers()) {
			t.Fatalf("member %d: %d streams, want %d", i, len(snap.Blocks), len(plain.Workers()))
		}
		for range 30 {
			q := g.query()
			ans := x.Query(&indexer.QueryRequest{Hashes: q, Options: allOptions}, 0)
			if ans.Partial() {
				t.Fatalf("member %d: partial answer after the move: missing %v recovering %v", i, ans.Missing, ans.Recovering)
			}
			checkAnswer(t, ms[i].Address(), ans, plain, q, shards)
		}
	}
}

// shardStatus asks shard's grain (placed from m's view) for its status.
func shardStatus(t *testing.T, m *member.Member, shard int) *clusterpb.ShardStatus {
	t.Helper()
	res, err := m.Cluster.Request(Identity(namespace, shard), Kind, &clusterpb.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res.(*clusterpb.Stats).GetStatus()
}

// barrier orders a Stats read after every batch each index's member sent.
func barrier(t *testing.T, idx ...*Index) {
	t.Helper()
	for _, x := range idx {
		if _, err := x.Stats(wait); err != nil {
			t.Fatal(err)
		}
	}
}
