package requestpath

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// setSaturated makes every rank of the fake's answer report saturation
// (or not).
func (f *fakeBackend) setSaturated(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.answer.Scores {
		f.answer.Scores[i].Saturated = on
	}
}

// routedIDs are the request ids routed, in order, from the n-th on.
func (f *fakeBackend) routedIDs(from int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.routed[min(from, len(f.routed)):] {
		out = append(out, r.RequestID)
	}
	return out
}

type result struct {
	b   *Booking
	err error
}

type flowFixture struct {
	t   *testing.T
	clk *frontendtest.Clock
	g   *Guard
	be  *fakeBackend
	p   *Path
}

func newFlowFixture(t *testing.T, fc FlowConfig) *flowFixture {
	clk := frontendtest.NewClock()
	g := newGuard(t, clk, GuardConfig{BreakerOff: true, Flow: &fc})
	be := &fakeBackend{answer: threeWorkers()}
	return &flowFixture{t: t, clk: clk, g: g, be: be, p: New(be, Config{Guard: g})}
}

// start routes a request in the background and waits until the queue
// holds want requests (it is queued).
func (x *flowFixture) start(ctx context.Context, id, objective, flow string, want int) <-chan result {
	x.t.Helper()
	out := make(chan result, 1)
	go func() {
		b, err := x.p.Route(ctx, Request{ID: id, Model: "m", Tokens: []uint32{1}, Objective: objective, RateKey: flow, Bytes: 100})
		out <- result{b, err}
	}()
	eventually.True(x.t, fmt.Sprintf("%s queued", id), func() (bool, string) {
		q, ok := x.g.Resting()
		return ok && q == want, fmt.Sprint(q, " queued, dispatcher resting ", ok)
	})
	return out
}

func (x *flowFixture) get(c <-chan result) result {
	x.t.Helper()
	var r result
	eventually.True(x.t, "the request answered", func() (bool, string) {
		select {
		case r = <-c:
			return true, ""
		default:
			return false, "still waiting"
		}
	})
	return r
}

var objectives = map[string]int{"critical": 10, "standard": 0, "scavenger": -1}

// With every worker saturated requests wait; once the engines recover, a
// dispatch routes them again — the critical band first, then the default
// band's fairness flows in turn (a's three do not starve b's one).
func TestFlowDispatchOrder(t *testing.T) {
	x := newFlowFixture(t, FlowConfig{Objectives: objectives})
	x.be.setSaturated(true)
	ctx := context.Background()
	var cs []<-chan result
	for i, r := range [][3]string{{"a1", "", "a"}, {"a2", "standard", "a"}, {"a3", "", "a"}, {"b1", "", "b"}, {"crit", "critical", "c"}} {
		cs = append(cs, x.start(ctx, r[0], r[1], r[2], i+1))
	}
	if _, err := x.p.Route(ctx, Request{ID: "shed", Model: "m", Tokens: []uint32{1}, Objective: "scavenger"}); !errors.Is(err, ErrOverloaded) || x.g.Queued() != 5 {
		t.Fatalf("sheddable request: %v, %d queued; want refused at once", err, x.g.Queued())
	}
	n := len(x.be.routedIDs(0))
	x.g.Dispatch() // still saturated: the first one goes back, nothing else moves
	if got := x.be.routedIDs(n); len(got) != 1 || got[0] != "crit" || x.g.Queued() != 5 {
		t.Fatalf("dispatch while saturated routed %v, %d queued", got, x.g.Queued())
	}
	x.be.setSaturated(false)
	n = len(x.be.routedIDs(0))
	x.g.Dispatch()
	if got, want := fmt.Sprint(x.be.routedIDs(n)), "[crit a1 b1 a2 a3]"; got != want {
		t.Fatalf("dispatch order %s, want %s", got, want)
	}
	for _, c := range cs {
		r := x.get(c)
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.b.Done(ctx)
	}
	if x.g.FlowCount(10, FlowDispatched) != 1 || x.g.FlowCount(0, FlowDispatched) != 4 || x.g.FlowCount(-1, FlowSheddable) != 1 {
		t.Errorf("counts: critical %d, default %d dispatched, %d shed", x.g.FlowCount(10, FlowDispatched), x.g.FlowCount(0, FlowDispatched), x.g.FlowCount(-1, FlowSheddable))
	}
	var sb strings.Builder
	if err := x.g.WriteMetrics(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kvrouter_flow_requests_total{band="10",outcome="dispatched"} 1`, `kvrouter_flow_requests_total{band="0",outcome="queued"} 4`,
		`kvrouter_flow_requests_total{band="-1",outcome="sheddable"} 1`, "kvrouter_flow_queue_requests 0\n", "kvrouter_flow_queue_bytes 0\n"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, sb.String())
		}
	}
}

// A booking freed is room: it kicks the dispatcher, no tick needed.
func TestFlowFreeDispatches(t *testing.T) {
	x := newFlowFixture(t, FlowConfig{})
	ctx := context.Background()
	first, err := x.p.Route(ctx, Request{ID: "first", Model: "m", Tokens: []uint32{1}})
	if err != nil {
		t.Fatal(err)
	}
	x.be.setSaturated(true)
	c := x.start(ctx, "waiting", "", "a", 1)
	x.be.setSaturated(false)
	first.Done(ctx)
	r := x.get(c)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.b.Done(ctx)
}

// Past its TTL a queued request is answered 429 (ErrOverloaded with a
// Retry-After); one whose client goes away leaves the queue; with no
// endpoint at all the wait is NoEndpointTTL and the answer 503.
func TestFlowExpiryCancelNoEndpoint(t *testing.T) {
	x := newFlowFixture(t, FlowConfig{TTL: 10 * time.Second, NoEndpointTTL: 5 * time.Second})
	x.be.setSaturated(true)
	ctx := context.Background()
	c := x.start(ctx, "late", "", "a", 1)
	x.clk.Advance(9 * time.Second)
	x.g.Dispatch() // still saturated, not yet expired
	x.clk.Advance(time.Second)
	x.g.Dispatch()
	r := x.get(c)
	var ra RetryAfterer
	var qe *QueueError
	if !errors.Is(r.err, ErrOverloaded) || !errors.As(r.err, &ra) || !errors.As(r.err, &qe) || qe.Why != FlowExpired || ra.RetryAfter() != FlowRetryAfter {
		t.Fatalf("after the TTL: %v", r.err)
	}
	cctx, cancel := context.WithCancel(ctx)
	c = x.start(cctx, "gone", "", "a", 1)
	cancel()
	if r := x.get(c); !errors.Is(r.err, context.Canceled) || x.g.Queued() != 0 || x.g.FlowCount(0, FlowGone) != 1 {
		t.Fatalf("client gone: %v, %d queued", r.err, x.g.Queued())
	}
	x.be.mu.Lock()
	x.be.answer = api.RouteResult{WorkerID: 1, Scores: []api.RouteScore{{WorkerID: 1}}} // no serving endpoint anywhere
	x.be.mu.Unlock()
	c = x.start(ctx, "noep", "", "a", 1)
	x.clk.Advance(5 * time.Second)
	x.g.Dispatch()
	if r := x.get(c); !errors.Is(r.err, ErrNoEndpoint) || errors.Is(r.err, ErrOverloaded) {
		t.Fatalf("no endpoint after NoEndpointTTL: %v", r.err)
	}
}

// A full queue evicts the lowest band's newest for a higher band's
// request (answered 429), and refuses one of the same band.
func TestFlowEviction(t *testing.T) {
	x := newFlowFixture(t, FlowConfig{MaxRequests: 1, Objectives: objectives})
	x.be.setSaturated(true)
	ctx := context.Background()
	low := x.start(ctx, "low", "", "a", 1)
	if _, err := x.p.Route(ctx, Request{ID: "same", Model: "m", Tokens: []uint32{1}, RateKey: "b"}); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("same band into a full queue: %v", err)
	}
	high := x.start(ctx, "high", "critical", "c", 1)
	var qe *QueueError
	if r := x.get(low); !errors.As(r.err, &qe) || qe.Why != FlowEvicted || !errors.Is(r.err, ErrOverloaded) {
		t.Fatalf("evicted: %v", r.err)
	}
	x.be.setSaturated(false)
	x.g.Dispatch()
	r := x.get(high)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.b.Done(ctx)
}

// Objectives found at run time give bands to the names the configuration
// does not give; the configured ones win; replacing them forgets the old.
func TestFlowSetObjectives(t *testing.T) {
	x := newFlowFixture(t, FlowConfig{Objectives: map[string]int{"critical": 10}})
	x.g.SetObjectives(map[string]int{"gold": 5, "critical": -3, "scavenger": -1})
	x.be.setSaturated(true)
	ctx := context.Background()
	if _, err := x.p.Route(ctx, Request{ID: "shed", Model: "m", Tokens: []uint32{1}, Objective: "scavenger"}); !errors.Is(err, ErrOverloaded) || x.g.Queued() != 0 {
		t.Fatalf("a found sheddable objective: %v, %d queued", err, x.g.Queued())
	}
	plain := x.start(ctx, "plain", "", "a", 1)
	gold := x.start(ctx, "gold", "gold", "a", 2)
	crit := x.start(ctx, "crit", "critical", "a", 3)
	x.be.setSaturated(false)
	n := len(x.be.routedIDs(0))
	x.g.Dispatch()
	if got, want := fmt.Sprint(x.be.routedIDs(n)), "[crit gold plain]"; got != want {
		t.Fatalf("dispatch order %s, want %s (critical stays 10 as configured)", got, want)
	}
	for _, c := range []<-chan result{plain, gold, crit} {
		if r := x.get(c); r.err != nil {
			t.Fatal(r.err)
		} else {
			r.b.Done(ctx)
		}
	}
	x.g.SetObjectives(nil)
	x.be.setSaturated(true)
	waiting := x.start(ctx, "was-shed", "scavenger", "a", 1) // band 0 now: it waits
	x.be.setSaturated(false)
	x.g.Dispatch()
	if r := x.get(waiting); r.err != nil {
		t.Fatalf("a forgotten objective, band 0: %v", r.err)
	} else {
		r.b.Done(ctx)
	}
}

// Headroom: with 8 booked blocks the cap and 4 kept for the band above, a
// default-band request finds no room on workers holding 10 and 5 blocks
// and waits, while a critical one is routed at once (worker 2 is under 8);
// a band with two bands above keeps twice the headroom, at least 1 block.
func TestFlowHeadroomKeepsRoomForHigherBands(t *testing.T) {
	clk := frontendtest.NewClock()
	g := newGuard(t, clk, GuardConfig{BreakerOff: true, Flow: &FlowConfig{Objectives: objectives, Headroom: 4}})
	p := New(&fakeBackend{answer: threeWorkers()}, Config{Guard: g, ShedAboveBlocks: 8})
	ctx := context.Background()
	crit, err := p.Route(ctx, Request{ID: "crit", Model: "m", Tokens: []uint32{1}, Objective: "critical"})
	if err != nil {
		t.Fatalf("critical request: %v, want routed (worker 2 has 5 blocks booked, under 8)", err)
	}
	crit.Done(ctx)
	waiting := make(chan error, 1)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := p.Route(cctx, Request{ID: "std", Model: "m", Tokens: []uint32{1}, Objective: "standard"})
		waiting <- err
	}()
	eventually.True(t, "the default-band request waits", func() (bool, string) {
		return g.Queued() == 1, fmt.Sprint(g.Queued(), " queued")
	})
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting request: %v", err)
	}
	for _, c := range []struct {
		objective string
		want      uint64
	}{{"critical", 8}, {"standard", 4}, {"scavenger", 1}} { // scavenger: 8 − 2×4 → at least 1
		if got := g.shedAbove(c.objective, 8); got != c.want {
			t.Errorf("%s: threshold %d, want %d", c.objective, got, c.want)
		}
	}
	if got := g.shedAbove("standard", 0); got != 0 {
		t.Errorf("no cap: threshold %d, want 0 (never shed)", got)
	}
}

// A request the dispatcher woke to route again is still waiting until it
// requeues or leaves: Queued (and the queue gauge) counts it all along,
// never one short while it routes.
func TestQueuedCountsTheRequestRoutingAgain(t *testing.T) {
	g := newGuard(t, frontendtest.NewClock(), GuardConfig{BreakerOff: true, Flow: &FlowConfig{TTL: time.Minute}})
	routing, answer := make(chan struct{}), make(chan error)
	first := true
	try := func() (*Booking, error) {
		if first { // the arrival: no room, so it queues
			first = false
			return nil, ErrNoRoom
		}
		routing <- struct{}{}
		return nil, <-answer
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.flow(context.Background(), Request{ID: "a", Model: "m"}, "k", try)
		done <- err
	}()
	<-routing // queued, then woken by the dispatcher its arrival kicked
	if q := g.Queued(); q != 1 {
		t.Fatalf("while routing again: %d queued, want 1", q)
	}
	answer <- ErrNoRoom // still no room: back in the queue, woken again by the next dispatch
	go g.Dispatch()
	<-routing
	if q := g.Queued(); q != 1 {
		t.Fatalf("routing again a second time: %d queued, want 1", q)
	}
	answer <- nil // room: dispatched
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q := g.Queued(); q != 0 {
		t.Fatalf("after the dispatch: %d queued", q)
	}
}
