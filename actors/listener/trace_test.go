package listener_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	"github.com/kvrouter/kvrouter/messages/wire"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// ingest is a simulated engine wired by hand to listener → normalizer pool
// → coalescer hub → a stand-in index that hands every RouterEventBatch to
// the test and acknowledges it, as an index shard does once it applied it.
type ingest struct {
	eng      *simengine.Engine
	system   *actor.ActorSystem
	listener *actor.PID
	indexPID *actor.PID
	index    chan *messages.RouterEventBatch
}

func startIngest(t *testing.T, seqStart uint64) *ingest {
	t.Helper()
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		BlockSize: 4, CapacityBlocks: 64, SeqStart: seqStart})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	in := &ingest{eng: eng, system: actor.NewActorSystem(), index: make(chan *messages.RouterEventBatch, 64)}
	root := in.system.Root
	index := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.RouterEventBatch); ok {
			in.index <- m
			if m.Ack != nil {
				c.Send(m.Ack.To, &m.Ack.Applied)
			}
		}
	}))
	in.indexPID = index
	hub := root.Spawn(coalescer.HubProps(index, coalescer.Config{}))
	pool := root.Spawn(normalizer.Props(hub, wire.Limits{}))
	props, err := listener.Props(listener.Config{Stream: messages.StreamID{Worker: 7, DpRank: 0},
		Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(), BlockSize: 4, Silence: -1,
		ReplayTimeout: time.Second, Next: pool})
	if err != nil {
		t.Fatal(err)
	}
	in.listener = root.Spawn(props)
	t.Cleanup(func() {
		for _, pid := range []*actor.PID{in.listener, pool, hub, index} {
			_ = root.StopFuture(pid).Wait()
		}
	})
	return in
}

func (in *ingest) stats(t *testing.T) *listener.Stats {
	t.Helper()
	res, err := in.system.Root.RequestFuture(in.listener, &listener.StatsRequest{}, time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return res.(*listener.Stats)
}

// settle publishes heartbeats until the listener hears one live (ZeroMQ
// drops what a PUB sends before the subscription arrives; a batch the
// listener got by replay proves nothing about the subscription, and a
// heartbeat published after it could still be dropped), then waits until
// nothing is in flight. It returns the next seq the engine will publish.
func (in *ingest) settle(t *testing.T) uint64 {
	t.Helper()
	eventually.True(t, "the listener hears the engine", func() (bool, string) {
		if err := in.eng.Publish(); err != nil {
			t.Fatal(err)
		}
		s := in.stats(t)
		return s.Received > 0, fmt.Sprintf("%+v", s)
	})
	eventually.True(t, "the listener catches up", func() (bool, string) {
		s := in.stats(t)
		return s.InFlight == 0 && !s.Replaying && s.NextSeq == in.eng.Stats().NextSeq, fmt.Sprintf("%+v", s)
	})
	return in.eng.Stats().NextSeq
}

// serve publishes one batch of stored blocks and returns what the index got
// for it.
func (in *ingest) serve(t *testing.T) *messages.RouterEventBatch {
	t.Helper()
	in.eng.Serve([]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}, "")
	for {
		select {
		case m := <-in.index:
			if len(m.Events) > 0 && m.Events[0].Event.Kind == messages.KindStored {
				return m
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the index got nothing")
		}
	}
}

// withSeq returns the recorded spans named name whose seq attribute is seq.
func withSeq(exp *tracetest.InMemoryExporter, name string, seq uint64) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spantest.ByName(exp, name) {
		for _, kv := range s.Attributes {
			if kv.Key == tracectx.Seq && kv.Value.AsInt64() == int64(seq) {
				out = append(out, s)
			}
		}
	}
	return out
}

// waitSpans waits until n spans named name with seq have ended.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, name string, seq uint64, n int) tracetest.SpanStubs {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%d %s spans for seq %d", n, name, seq), func() (bool, string) {
		got := len(withSeq(exp, name, seq))
		return got >= n, fmt.Sprint(got, " spans")
	})
	s := withSeq(exp, name, seq)
	if len(s) != n {
		t.Fatalf("%d %s spans for seq %d, want %d", len(s), name, seq, n)
	}
	return s
}

func TestOneBatchIsOneTrace(t *testing.T) {
	exp := spantest.Install(t, nil)
	in := startIngest(t, 0)
	seq := in.settle(t)
	applied := in.serve(t)

	batch := waitSpans(t, exp, listener.SpanBatch, seq, 1)[0]
	norm := waitSpans(t, exp, normalizer.SpanNormalize, seq, 1)[0]
	coal := waitSpans(t, exp, coalescer.SpanCoalesce, seq, 1)[0]
	traceID := batch.SpanContext.TraceID()
	if batch.Parent.IsValid() {
		t.Errorf("the listener's span has a parent: %v", batch.Parent)
	}
	parented := func(child, parent tracetest.SpanStub) {
		t.Helper()
		if child.SpanContext.TraceID() != traceID || child.Parent.SpanID() != parent.SpanContext.SpanID() {
			t.Errorf("%s (trace %v, parent %v) is not a child of %s (%v)", child.Name,
				child.SpanContext.TraceID(), child.Parent.SpanID(), parent.Name, parent.SpanContext.SpanID())
		}
	}
	parented(norm, batch)
	parented(coal, norm)
	var inTrace []string
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() == traceID {
			inTrace = append(inTrace, s.Name)
		}
	}
	if len(inTrace) != 3 {
		t.Errorf("trace holds %v, want the listener's, normalizer's and coalescer's spans", inTrace)
	}
	if got, want := tracectx.SpanContext(applied.Trace).SpanID(), coal.SpanContext.SpanID(); got != want {
		t.Errorf("the index's batch carries span %v, want the coalescer's %v (the apply span's parent)", got, want)
	}
	for key, want := range map[attribute.Key]int64{tracectx.Worker: 7, tracectx.DpRank: 0, tracectx.Seq: int64(seq)} {
		if v, ok := attr(batch.Attributes, key); !ok || v.AsInt64() != want {
			t.Errorf("listener span %s = %v, want %d", key, v.Emit(), want)
		}
	}
	if v, _ := attr(batch.Attributes, tracectx.Bytes); v.AsInt64() <= 0 {
		t.Errorf("listener span bytes = %v", v.Emit())
	}
	if v, _ := attr(norm.Attributes, tracectx.Events); v.AsInt64() != 1 {
		t.Errorf("normalizer span events = %v, want 1", v.Emit())
	}
}

func TestRecoveryIsTraced(t *testing.T) {
	exp := spantest.Install(t, nil)
	in := startIngest(t, 40) // a router started after the engine: seq 0..39 are gone
	in.settle(t)

	// The listener asked the engine's replay endpoint for what it holds: a
	// trace of its own, with its result.
	okReplays := 0
	for _, s := range spantest.ByName(exp, listener.SpanReplay) {
		if v, _ := attr(s.Attributes, "kvrouter.replay.result"); v.AsString() == "ok" {
			okReplays++
		}
	}
	if okReplays == 0 {
		t.Errorf("no replay span with result ok")
	}
	// The first delivered batch resynced the stream, degraded (history
	// before seq 40 unknown): an event on the listener's span, and on the
	// coalescer's span of the same trace, which reports the new state.
	var resynced tracetest.SpanStubs
	for _, s := range spantest.ByName(exp, listener.SpanBatch) {
		if len(s.Events) > 0 && s.Events[0].Name == listener.EventResync {
			resynced = append(resynced, s)
		}
	}
	if len(resynced) != 1 {
		t.Fatalf("%d batch spans carry a resync, want 1", len(resynced))
	}
	checkResync(t, resynced[0], listener.ResyncStart.String(), false)
	var coal tracetest.SpanStubs
	for _, s := range spantest.ByName(exp, coalescer.SpanCoalesce) {
		if s.SpanContext.TraceID() == resynced[0].SpanContext.TraceID() {
			coal = append(coal, s)
		}
	}
	if len(coal) != 1 {
		t.Fatalf("%d coalescer spans in the resync's trace, want 1", len(coal))
	}
	checkResync(t, coal[0], listener.ResyncStart.String(), false)
	checkState(t, coal[0], coalescer.StateDegraded)

	// The engine empties its cache: the stream is exact again, and the
	// coalescer's span says so.
	seq := in.eng.Stats().NextSeq
	if err := in.eng.Clear(); err != nil {
		t.Fatal(err)
	}
	cleared := waitSpans(t, exp, coalescer.SpanCoalesce, seq, 1)[0]
	if len(cleared.Events) != 1 || cleared.Events[0].Name != coalescer.EventEngineCleared {
		t.Errorf("coalescer span events %+v, want %s", cleared.Events, coalescer.EventEngineCleared)
	}
	checkState(t, cleared, coalescer.StateExact)
}

func checkResync(t *testing.T, s tracetest.SpanStub, reason string, exact bool) {
	t.Helper()
	if len(s.Events) == 0 || s.Events[0].Name != listener.EventResync {
		t.Fatalf("%s has no resync event: %+v", s.Name, s.Events)
	}
	r, _ := attr(s.Events[0].Attributes, tracectx.Reason)
	e, _ := attr(s.Events[0].Attributes, tracectx.Exact)
	if r.AsString() != reason || e.AsBool() != exact {
		t.Errorf("%s resync event %v, want reason %s exact %v", s.Name, s.Events[0].Attributes, reason, exact)
	}
}

func checkState(t *testing.T, s tracetest.SpanStub, want coalescer.StreamState) {
	t.Helper()
	if v, _ := attr(s.Attributes, "kvrouter.stream.state"); v.AsString() != string(want) {
		t.Errorf("%s state %q, want %q", s.Name, v.Emit(), want)
	}
}

func TestNoProviderNoTraceContext(t *testing.T) {
	in := startIngest(t, 0)
	in.settle(t)
	if applied := in.serve(t); applied.Trace != (messages.TraceContext{}) {
		t.Fatalf("without a tracer provider the index got trace context %+v, want zero", applied.Trace)
	}
}

// attr returns the value of key among kvs.
func attr(kvs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	set := attribute.NewSet(kvs...)
	return set.Value(key)
}
