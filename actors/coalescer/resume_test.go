package coalescer

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// TestResumedStreamKeepsStateUntilAResync follows a stream resumed from a
// loaded dump: the keeping resync drops nothing and takes the peer's state;
// emitted batches carry the stream's position; a later resync clears the
// registered rank although this actor never saw it store anything.
func TestResumedStreamKeepsStateUntilAResync(t *testing.T) {
	system := actor.NewActorSystem()
	got := make(chan *messages.RouterEventBatch, 8)
	index := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if b, ok := ctx.Message().(*messages.RouterEventBatch); ok {
			got <- b
		}
	}))
	hub := system.Root.Spawn(HubProps(index, Config{}))
	stream := messages.StreamID{Worker: 3, DpRank: 1}
	key := messages.WorkerKey{Worker: 3, DpRank: 1}
	store := messages.PlacementEvent{Placement: messages.Placement{Worker: key},
		Event: messages.KvCacheEvent{EventID: 12, Kind: messages.KindStored, DpRank: 1,
			Blocks: []messages.StoredBlock{{BlockHash: 5, TokensHash: 6}}}}
	next := func() *messages.RouterEventBatch {
		t.Helper()
		select {
		case b := <-got:
			return b
		case <-time.After(5 * time.Second):
			t.Fatal("no batch reached the index")
			return nil
		}
	}

	system.Root.Send(hub, &messages.NormalizedBatch{Stream: stream, Seq: 11,
		Resync: messages.Resync{Reason: "resumed", Exact: true, Keep: true}, Events: []messages.PlacementEvent{store}})
	b := next()
	if len(b.Clear) != 0 || len(b.Events) != 1 || b.Events[0].Event.Kind != messages.KindStored {
		t.Fatalf("resumed batch: %+v, want the store alone", b)
	}
	if b.Position != (messages.Position{Stream: stream, Seq: 11, Exact: true, Known: true}) {
		t.Fatalf("position %+v", b.Position)
	}
	// The stream reports its state to the hub after sending the batch.
	eventually.True(t, "the hub reports the stream exact at 11", func() (bool, string) {
		res, err := system.Root.RequestFuture(hub, &StatusRequest{}, time.Second).Result()
		if err != nil {
			return false, err.Error()
		}
		st := res.(*Status).Streams[stream]
		return st.State == StateExact && st.LastSeq == 11, fmt.Sprintf("%+v", st)
	})

	system.Root.Send(hub, &messages.NormalizedBatch{Stream: stream, Seq: 20,
		Resync: messages.Resync{Reason: "history_missing"}})
	b = next()
	if len(b.Events) != 1 || b.Events[0].Event.Kind != messages.KindCleared || b.Events[0].WorkerID != 3 || b.Events[0].Event.DpRank != 1 {
		t.Fatalf("resync after resume: %+v, want a Cleared of worker 3 rank 1", b)
	}
	if b.Position != (messages.Position{Stream: stream, Seq: 20, Known: true}) {
		t.Fatalf("position %+v, want degraded at 20", b.Position)
	}
}
