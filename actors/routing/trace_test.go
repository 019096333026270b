package routing

import (
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	"go.opentelemetry.io/otel/attribute"
)

// TestDecideSpan checks that a traced route request records the decision
// as a child of the span it carries, with the chosen worker, its overlap
// and the candidates (degraded ones counted), and that an untraced one
// records nothing.
func TestDecideSpan(t *testing.T) {
	exp := spantest.Install(t, nil)
	system, pid := spawnRouteActor(t)
	a, b := messages.WorkerKey{Worker: 1}, messages.WorkerKey{Worker: 2, DpRank: 1}
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: a, Degraded: true}, {Key: b}}})
	route := func(id string, tc messages.TraceContext) *RouteReply {
		t.Helper()
		res, err := system.Root.RequestFuture(pid, &RouteRequest{Request: Request{ID: id, ISL: 64, BlockSize: 16},
			Overlaps: []Overlap{{Key: b, Blocks: 3}}, Trace: tc}, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*RouteReply)
	}
	route("untraced", messages.TraceContext{})
	system.Root.Send(pid, &Bookkeeping{ID: "untraced", Free: true}) // no load left behind
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("an untraced request recorded %d spans", n)
	}
	parent := tracectx.NewTracer("test").Root("POST /route")
	reply := route("traced", parent.Context())
	parent.End()
	if reply.Err != nil || reply.Decision.Worker != b {
		t.Fatalf("decision %+v, %v: want worker 2 rank 1", reply.Decision, reply.Err)
	}
	spans := spantest.ByName(exp, SpanDecide)
	if len(spans) != 1 {
		t.Fatalf("%d decision spans, want 1", len(spans))
	}
	s, pc := spans[0], parent.Context()
	if s.Parent.TraceID() != pc.TraceID || s.Parent.SpanID() != pc.SpanID {
		t.Errorf("decision span's parent %v, want the request's span", s.Parent)
	}
	want := map[attribute.Key]int64{tracectx.Worker: 2, tracectx.DpRank: 1, overlapKey: 3, candidatesKey: 2, degradedKey: 1}
	got := map[attribute.Key]int64{}
	for _, kv := range s.Attributes {
		got[kv.Key] = kv.Value.AsInt64()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %d, want %d", k, got[k], v)
		}
	}
	if len(s.Events) != 0 {
		t.Errorf("a booked decision's span has events %v", s.Events)
	}

	// A choice the room rule refuses: an event names the rank, no booking.
	res, err := system.Root.RequestFuture(pid, &RouteRequest{Request: Request{ID: "held", ISL: 64, BlockSize: 16,
		KeepRoom: api.RoomRule{Ranks: 2}}, Trace: parent.Context()}, time.Second).Result()
	if err != nil || !errors.Is(res.(*RouteReply).Err, api.ErrRoomKept) {
		t.Fatalf("two ranks kept besides the choice among two: %v %v, want ErrRoomKept", res, err)
	}
	spans = spantest.ByName(exp, SpanDecide)
	if len(spans) != 2 || len(spans[1].Events) != 1 || spans[1].Events[0].Name != EventRoomKept {
		t.Fatalf("the refused decision's span: %+v, want one %s event", spans, EventRoomKept)
	}
}
