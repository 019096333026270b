package indexer

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/expiry"
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

// TestLookupSpanPerShard checks that a traced query records one lookup span
// per shard, each a child of the span the query carries, and that an
// untraced query records none.
func TestLookupSpanPerShard(t *testing.T) {
	exp := spantest.Install(t, nil)
	system := actor.NewActorSystem()
	x := Spawn(system.Root, Config{Shards: 3})
	defer x.Stop()
	if _, err := x.Query(&QueryRequest{Hashes: []messages.LocalHash{1, 2}}, time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(spantest.ByName(exp, SpanLookup)); n != 0 {
		t.Fatalf("an untraced query recorded %d lookup spans", n)
	}
	parent := tracectx.NewTracer("test").Root("POST /route")
	if _, err := x.Query(&QueryRequest{Hashes: []messages.LocalHash{1, 2}, Trace: parent.Context()}, time.Second); err != nil {
		t.Fatal(err)
	}
	parent.End()
	spans := spantest.ByName(exp, SpanLookup)
	if len(spans) != 3 {
		t.Fatalf("%d lookup spans, want one per shard (3)", len(spans))
	}
	pc := parent.Context()
	for _, s := range spans {
		if s.Parent.TraceID() != pc.TraceID || s.Parent.SpanID() != pc.SpanID {
			t.Errorf("lookup span's parent %v, want the query's span", s.Parent)
		}
	}
}

// TestExpiredQuerySkipsTheLookup checks that a query taken past its
// deadline is answered expiry.ErrExpired by every shard, counted once per
// shard, and looked up by none (no lookup span), while the same query
// before its deadline is looked up by all. The deadlines are fixed
// instants, not the clock's.
func TestExpiredQuerySkipsTheLookup(t *testing.T) {
	exp := spantest.Install(t, nil)
	system := actor.NewActorSystem()
	x := Spawn(system.Root, Config{Shards: 3})
	defer x.Stop()
	parent := tracectx.NewTracer("test").Root("POST /route")
	defer parent.End()
	before := expiry.Counts()[expiry.Shard].N
	q := &QueryRequest{Hashes: []messages.LocalHash{1, 2}, Trace: parent.Context(), Deadline: time.Unix(1, 0)}
	if _, err := x.Query(q, time.Minute); !errors.Is(err, expiry.ErrExpired) {
		t.Fatalf("query long past its deadline: %v, want ErrExpired", err)
	}
	// Query returns at the first expired answer; an ordered read, sent
	// after, is handled after the query on every shard.
	if _, err := x.Stats(time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := len(spantest.ByName(exp, SpanLookup)); n != 0 {
		t.Fatalf("the expired query was looked up %d times", n)
	}
	q.Deadline = time.Now().Add(time.Hour)
	if _, err := x.Query(q, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := len(spantest.ByName(exp, SpanLookup)); n != 3 {
		t.Fatalf("a query before its deadline was looked up %d times, want once per shard (3)", n)
	}
	if n := expiry.Counts()[expiry.Shard].N - before; n != 3 {
		t.Errorf("expired counted %d times, want 3", n)
	}
}
