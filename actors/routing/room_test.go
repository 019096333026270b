package routing

import (
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

// A RoomRule refuses a decision that would leave fewer ranks with room
// than it keeps, before booking: nothing booked, the id free to route
// again; ranks over the cap or saturated have no room, the chosen rank
// is left aside, and AboveBlocks 0 counts every unsaturated rank.
func TestRouteKeepsRoom(t *testing.T) {
	A, B, C := wk(1, 0), wk(2, 0), wk(3, 0)
	r := newRouter(t, DynamoConfig())
	loadOn(t, r, "a", A, 0, 12) // over the cap of 10
	loadOn(t, r, "b", B, 0, 4)
	c := cands(A, B, C)
	req := func(ranks int, above uint64) Request {
		return Request{ID: "x", ISL: 16, BlockSize: 16, KeepRoom: api.RoomRule{Ranks: ranks, AboveBlocks: above}}
	}
	before := r.Load().Len()

	d, err := r.Route(req(2, 10), nil, c, t0) // C chosen; only B has room besides it
	if !errors.Is(err, api.ErrRoomKept) || d.Worker != C {
		t.Fatalf("keep 2: %v %v, want C's decision refused with ErrRoomKept", d.Worker, err)
	}
	if r.Load().Len() != before || r.Load().Of(C) != (RankLoad{Key: C}) {
		t.Fatalf("a refused decision booked: %d requests, C %+v", r.Load().Len(), r.Load().Of(C))
	}
	if _, err := r.Route(req(2, 0), nil, c, t0); err != nil { // no cap: A has room too
		t.Fatalf("keep 2 without a cap: %v", err)
	}
	if r.Load().Len() != before+1 || r.Load().Of(C).Blocks != 1 {
		t.Fatalf("the admitted decision: %d requests, C %+v", r.Load().Len(), r.Load().Of(C))
	}

	r = newRouter(t, DynamoConfig())
	loadOn(t, r, "a", A, 0, 12)
	c = cands(A, B, C)
	if _, err := r.Route(req(1, 10), nil, c, t0); err != nil { // C chosen (least loaded), B has room
		t.Fatalf("keep 1: %v", err)
	}
	c[1].Reported.Saturated = true // B's engine saturated: no room there
	r = newRouter(t, DynamoConfig())
	loadOn(t, r, "a", A, 0, 12)
	if d, err := r.Route(req(1, 10), nil, c, t0); !errors.Is(err, api.ErrRoomKept) || d.Worker != C {
		t.Fatalf("keep 1, B saturated: %v %v, want refused", d.Worker, err)
	}
	if _, err := r.Route(req(0, 10), nil, c, t0); err != nil {
		t.Fatalf("no rule: %v", err)
	}
}
