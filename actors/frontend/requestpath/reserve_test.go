package requestpath

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

func TestRoomLeft(t *testing.T) {
	w := func(id messages.WorkerID, booked uint64, saturated bool) Candidate {
		return Candidate{Key: messages.WorkerKey{Worker: id}, BookedBlocks: booked, Saturated: saturated}
	}
	to := messages.WorkerKey{Worker: 1}
	for _, c := range []struct {
		name      string
		fleet     []Candidate
		threshold uint64
		want      int
	}{
		{"the rank it goes to is left aside", []Candidate{w(1, 0, false), w(2, 0, false)}, 8, 1},
		{"at the cap is room, over it none", []Candidate{w(1, 0, false), w(2, 8, false), w(3, 9, false)}, 8, 1},
		{"a saturated engine has no room", []Candidate{w(2, 0, true), w(3, 0, false)}, 8, 1},
		{"no cap: every rank not saturated has room", []Candidate{w(2, 1<<20, false), w(3, 0, true)}, 0, 1},
		{"another dp rank of the same worker counts", []Candidate{w(1, 0, false), {Key: messages.WorkerKey{Worker: 1, DpRank: 1}}}, 8, 1},
		{"no fleet", nil, 8, 0},
	} {
		if got := RoomLeft(c.fleet, to, c.threshold); got != c.want {
			t.Errorf("%s: %d workers with room, want %d", c.name, got, c.want)
		}
	}
}

// fourWorkers is a route answer choosing worker 1 (4 blocks booked) in a
// fleet where, under a cap of 8, worker 2 has room (8 booked), worker 3
// none (9) and worker 4 is saturated.
func fourWorkers() api.RouteResult {
	return api.RouteResult{WorkerID: 1, ServingEndpoint: "h1:1", Scores: []api.RouteScore{
		{WorkerID: 1, Logit: 1, ActiveDecodeBlocks: 4, ServingEndpoint: "h1:1"},
		{WorkerID: 2, Logit: 2, ActiveDecodeBlocks: 8, ServingEndpoint: "h2:1"},
		{WorkerID: 3, Logit: 3, ActiveDecodeBlocks: 9, ServingEndpoint: "h3:1"},
		{WorkerID: 4, Logit: 4, ServingEndpoint: "h4:1", Saturated: true},
	}}
}

// The fleet-wide reserve: with one worker besides the chosen one having
// room, a reserve of one admits a default-band request and a reserve of
// two holds it back in the queue (counted reserved) while a critical one
// is routed at once; a sheddable band, two bands below the top, keeps
// twice the reserve and is refused at once. Once worker 3 frees, the
// waiting request is dispatched.
func TestReserveKeepsWorkersForHigherBands(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		reserve int
		held    bool
	}{{0, false}, {1, false}, {2, true}} {
		t.Run(fmt.Sprint("reserve ", c.reserve), func(t *testing.T) {
			g := newGuard(t, frontendtest.NewClock(), GuardConfig{BreakerOff: true, Flow: &FlowConfig{Objectives: objectives, ReserveWorkers: c.reserve}})
			be := &fakeBackend{answer: fourWorkers()}
			p := New(be, Config{Guard: g, ShedAboveBlocks: 8})
			crit, err := p.Route(ctx, Request{ID: "crit", Model: "m", Tokens: []uint32{1}, Objective: "critical"})
			if err != nil {
				t.Fatalf("critical request: %v, want routed (the top band keeps no reserve)", err)
			}
			crit.Done(ctx)
			done := make(chan result, 1)
			go func() {
				b, err := p.Route(ctx, Request{ID: "std", Model: "m", Tokens: []uint32{1}, Objective: "standard"})
				done <- result{b, err}
			}()
			if !c.held {
				r := <-done
				if r.err != nil {
					t.Fatalf("default band: %v, want routed", r.err)
				}
				r.b.Done(ctx)
				if n := p.Metrics().Count("decisions", OutcomeReserved, ""); n != 0 {
					t.Fatalf("%d reserved decisions, want none", n)
				}
				return
			}
			eventually.True(t, "the default-band request waits", func() (bool, string) {
				q, ok := g.Resting()
				return ok && q == 1, fmt.Sprint(q, " queued, dispatcher resting ", ok)
			})
			if n := p.Metrics().Count("decisions", OutcomeReserved, ""); n < 1 {
				t.Fatalf("%d reserved decisions, want the held request's", n)
			}
			_, err = p.Route(ctx, Request{ID: "shed", Model: "m", Tokens: []uint32{1}, Objective: "scavenger"})
			if !errors.Is(err, ErrNoRoom) || g.FlowCount(-1, FlowSheddable) != 1 {
				t.Fatalf("sheddable request: %v, want refused at once for want of room", err)
			}
			if got := g.reserve("scavenger"); got != 4 {
				t.Fatalf("sheddable band's reserve %d, want 2 bands above × 2", got)
			}
			roomOnWorker3(t, be, g, done)
			if n := g.FlowCount(0, FlowDispatched); n != 1 {
				t.Fatalf("%d default-band requests dispatched, want 1", n)
			}
		})
	}
}

// With a router that applies the rule before booking, a request the
// reserve holds back is never booked (so never freed): the route request
// carries the reserve and the cap, a top-band request carries none, and
// the held request waits in the queue, counted reserved, until there is
// room.
func TestReserveDecidedBeforeBooking(t *testing.T) {
	ctx := context.Background()
	g := newGuard(t, frontendtest.NewClock(), GuardConfig{BreakerOff: true, Flow: &FlowConfig{Objectives: objectives, ReserveWorkers: 2}})
	be := &fakeBackend{answer: fourWorkers(), keepsRoom: true}
	p := New(be, Config{Guard: g, ShedAboveBlocks: 8})
	crit, err := p.Route(ctx, Request{ID: "crit", Model: "m", Tokens: []uint32{1}, Objective: "critical"})
	if err != nil {
		t.Fatal(err)
	}
	crit.Done(ctx)
	done := make(chan result, 1)
	go func() {
		b, err := p.Route(ctx, Request{ID: "std", Model: "m", Tokens: []uint32{1}, Objective: "standard"})
		done <- result{b, err}
	}()
	eventually.True(t, "the default-band request waits", func() (bool, string) {
		q, ok := g.Resting()
		return ok && q == 1, fmt.Sprint(q, " queued, dispatcher resting ", ok)
	})
	be.mu.Lock()
	rules := []api.RoomRule{be.routed[0].KeepRoom, be.routed[1].KeepRoom}
	calls := fmt.Sprint(be.calls)
	be.mu.Unlock()
	if rules[0] != (api.RoomRule{}) || rules[1] != (api.RoomRule{Ranks: 2, AboveBlocks: 8}) {
		t.Fatalf("room rules sent: %+v, want none for the top band, 2 ranks at most 8 blocks for the default one", rules)
	}
	if calls != "[free crit]" {
		t.Fatalf("bookkeeping calls %s: the held request was booked and freed", calls)
	}
	if n := p.Metrics().Count("decisions", OutcomeReserved, ""); n < 1 {
		t.Fatalf("%d reserved decisions, want the held request's attempts", n)
	}
	roomOnWorker3(t, be, g, done)
}

// roomOnWorker3 frees worker 3 of fourWorkers and dispatches the queue:
// the request waiting on done must then be routed.
func roomOnWorker3(t *testing.T, be *fakeBackend, g *Guard, done <-chan result) {
	t.Helper()
	be.mu.Lock()
	be.answer.Scores[2].ActiveDecodeBlocks = 0
	be.mu.Unlock()
	g.Dispatch()
	r := <-done
	if r.err != nil {
		t.Fatalf("once worker 3 has room: %v, want dispatched", r.err)
	}
	r.b.Done(context.Background())
}
