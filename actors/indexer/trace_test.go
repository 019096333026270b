package indexer

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
)

// TestApplySpanJoinsTheBatchTrace checks that a shard applying a traced
// batch records its span as a child of the span the batch carries, and
// that an untraced batch records none.
func TestApplySpanJoinsTheBatchTrace(t *testing.T) {
	exp := spantest.Install(t, nil)
	system := actor.NewActorSystem()
	x := Spawn(system.Root, Config{Shards: 2})
	defer x.Stop()
	parent := tracectx.NewTracer("test").Root("kvrouter.coalesce")
	store := messages.RouterEvent{WorkerID: 5, Event: messages.KvCacheEvent{EventID: 1, Kind: messages.KindStored,
		Blocks: []messages.StoredBlock{{BlockHash: 1, TokensHash: 2}}}}
	system.Root.Send(x.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{store}, Trace: parent.Context()})
	system.Root.Send(x.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{store}})
	parent.End()
	if _, err := x.Stats(time.Second); err != nil { // a barrier: both batches applied
		t.Fatal(err)
	}
	spans := spantest.ByName(exp, SpanApply)
	if len(spans) != 1 {
		t.Fatalf("%d apply spans, want 1 (the untraced batch records none)", len(spans))
	}
	pc := parent.Context()
	if got := spans[0].Parent; got.TraceID() != pc.TraceID || got.SpanID() != pc.SpanID {
		t.Fatalf("apply span's parent %v, want the batch's span %x/%x", got, pc.TraceID, pc.SpanID)
	}
}
