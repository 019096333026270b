package clusterindex

import (
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// TestRebuildProtocolOneMember (one member, under -race): a fresh shard
// activation asks the member's agent which streams its listeners feed it;
// the agent asks each such listener to rebuild; the shard reports
// recovering until the listener's answer comes back through the index
// front, then counts the stream degraded when the rebuild was inexact.
// Shards no listener feeds are whole at once; followers get every batch,
// and a batch's acknowledgement reaches its listener once the batch is
// handed to its grain.
func TestRebuildProtocolOneMember(t *testing.T) {
	node := NewNode(Config{Shards: 4, QueryDeadline: wait})
	ms := startMembers(t, "ci-protocol", node.Join)
	root := ms[0].Cluster.ActorSystem.Root

	type ask struct {
		tag uint64
		to  *actor.PID
	}
	asked := make(chan ask, 4)
	standIn := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*listener.Rebuild); ok {
			asked <- ask{m.Tag, c.Sender()}
		}
	}))
	followed := make(chan *messages.RouterEventBatch, 4)
	follower := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.RouterEventBatch); ok {
			followed <- m
		}
	}))
	const w = messages.WorkerID(3)
	stream := messages.StreamID{Worker: w}
	pidx := node.NewIndex(pipeline.IndexEnv{Root: root, Namespace: namespace, Followers: []*actor.PID{follower},
		Listeners: func() map[messages.StreamID]*actor.PID { return map[messages.StreamID]*actor.PID{stream: standIn} },
	}).(*PipelineIndex)
	defer pidx.Stop()
	shard := indexer.ShardOf(w, pidx.Index().Shards())

	acked := make(chan *messages.Applied, 4)
	acker := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.Applied); ok {
			acked <- m
		}
	}))
	batch := &messages.RouterEventBatch{Events: []messages.RouterEvent{{WorkerID: w, Event: messages.KvCacheEvent{
		EventID: 1, Kind: messages.KindStored, Blocks: []messages.StoredBlock{{BlockHash: 11, TokensHash: 22}}}}},
		Ack: &messages.Ack{To: acker, Applied: messages.Applied{Stream: stream, Seq: 9, Count: 1}}}
	root.Send(pidx.PID(), batch)
	select {
	case m := <-followed:
		if m != batch {
			t.Fatalf("follower got %+v", m)
		}
	case <-time.After(wait):
		t.Fatal("the follower got no batch")
	}
	select {
	case m := <-acked:
		if m.Seq != 9 || m.Stream != stream {
			t.Fatalf("acknowledgement %+v, want seq 9 of %v", m, stream)
		}
	case <-time.After(wait):
		t.Fatal("the batch was never acknowledged")
	}
	var a ask
	select {
	case a = <-asked:
	case <-time.After(wait):
		t.Fatal("the listener was never asked to rebuild")
	}
	q := &indexer.QueryRequest{Hashes: []messages.LocalHash{22}, Options: allOptions}
	waitFor(t, "only the fed shard recovering", func() bool {
		_, cov, err := pidx.QueryCoverage(q, 0)
		return err == nil && len(cov.Missing) == 0 && slices.Equal(cov.Recovering, []int{shard}) &&
			cov.RecoveringWorker(w) && cov.RecoveringWorker(w+1) == (indexer.ShardOf(w+1, 4) == shard)
	})
	// The listener re-feeds (here: the batch again) and answers.
	root.Send(pidx.PID(), batch)
	root.Send(a.to, &listener.Rebuilt{Stream: stream, Tag: a.tag, Exact: false})
	waitFor(t, "the shard whole again", func() bool {
		_, cov, _ := pidx.QueryCoverage(q, 0)
		return !cov.Partial()
	})
	res, err := pidx.Query(q, time.Second)
	if err != nil || len(res.Scores) != 1 || res.Scores[0].Key.Worker != w || res.Scores[0].Blocks != 1 {
		t.Fatalf("query %+v, %v: want worker %d with 1 block", res, err, w)
	}
	st, err := ms[0].Cluster.Request(Identity(namespace, shard), Kind, &clusterpb.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s := st.(*clusterpb.Stats).GetStatus(); s.GetDegraded() != 1 || s.GetRecovering() || s.GetOrphaned() != 0 {
		t.Fatalf("shard status %v, want 1 degraded stream, not recovering, no orphans", s)
	}
}
