package picker

import (
	"fmt"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
)

// flowE2E is the fake Envoy's fleet of three engines with flow control on
// and "no room" meaning more than one block booked: three requests held
// open fill it, and every other one waits.
type flowE2E struct {
	*e2e
	g   *requestpath.Guard
	clk *frontendtest.Clock
}

func newFlowE2E(t *testing.T) *flowE2E {
	clk := frontendtest.NewClock()
	g := newTestGuard(t, clk, requestpath.GuardConfig{BreakerOff: true, Flow: &requestpath.FlowConfig{TTL: 10 * time.Second,
		Objectives: map[string]int{"critical": 10, "batch": 0, "scavenger": -1}}})
	return &flowE2E{e2e: newPathE2E(t, Config{}, false, requestpath.Config{Guard: g, ShedAboveBlocks: 1}), g: g, clk: clk}
}

// open sends one request's headers (with its objective and fairness id)
// and body, as Envoy does in full-duplex mode.
func (f *flowE2E) open(n int, objective, fairness string) *et.Stream {
	h := f.envoy.Open()
	p := prompt(5000+100*n, 2)
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil,
		"x-gateway-inference-objective", objective, "x-gateway-inference-fairness-id", fairness), et.RequestBody(body(p), true))
	return h
}

// routed checks r is the picker's routing answer and returns its
// destination; the body answer follows.
func routed(t *testing.T, h *et.Stream, r *extprocv3.ProcessingResponse) string {
	t.Helper()
	set := r.GetRequestHeaders().GetResponse().GetHeaderMutation().GetSetHeaders()
	if len(set) == 0 {
		t.Fatalf("answer %q, want a destination", et.Describe(r))
	}
	h.Recv() // the body, streamed on
	return string(set[0].GetHeader().GetRawValue())
}

// complete is the engine's 200 answer through Envoy, then the stream's
// end: the request's booking is freed.
func complete(t *testing.T, h *et.Stream, dest string) {
	t.Helper()
	h.Send(et.ResponseHeaders("200", dest, false), et.ResponseBody("{}", true, ""))
	h.Expect("resp_headers", "resp_body streamed=2 eos")
	h.Finish()
}

// hold fills the fleet: three requests routed and left open.
func (f *flowE2E) hold(t *testing.T) (hs []*et.Stream, dests []string) {
	t.Helper()
	for i := range 3 {
		h := f.open(i, "", "holder")
		hs, dests = append(hs, h), append(dests, routed(t, h, h.Recv()))
	}
	return hs, dests
}

// queue opens a request and waits until it is queued (want in all).
func (f *flowE2E) queue(t *testing.T, n int, objective, fairness string, want int) (*et.Stream, <-chan et.Reply) {
	t.Helper()
	h := f.open(n, objective, fairness)
	waitFor(t, fmt.Sprintf("request %d queued", n), func() (bool, any) { q, ok := f.g.Resting(); return ok && q == want, q })
	return h, h.Next()
}

// Through the fake Envoy: while every engine has no room the picker holds
// the streams of the requests that wait; as room frees they are routed
// one at a time — the critical band first, then the default band's
// fairness ids in turn (x's two do not pass y's one). A sheddable
// objective is refused at once.
func TestFlowControlThroughFakeEnvoy(t *testing.T) {
	f := newFlowE2E(t)
	held, dests := f.hold(t)
	names := []string{"x1", "x2", "y1", "crit"}
	streams := map[string]*et.Stream{}
	next := map[string]<-chan et.Reply{}
	for i, r := range [][2]string{{"batch", "x"}, {"batch", "x"}, {"", "y"}, {"critical", "z"}} {
		streams[names[i]], next[names[i]] = f.queue(t, 10+i, r[0], r[1], i+1)
	}
	shed := f.open(20, "scavenger", "s")
	shed.Expect("immediate 429")
	shed.Closed()
	// Each freed booking lets exactly one waiter through; the one that
	// moved must be the next in order, and it frees its own room in turn.
	complete(t, held[0], dests[0])
	var order []string
	for range names {
		var who string
		var reply et.Reply
		waitFor(t, "a waiting request routed", func() (bool, any) {
			for _, n := range names {
				select {
				case reply = <-next[n]:
					who = n
					return true, nil
				default:
				}
			}
			return false, f.g.Queued()
		})
		if reply.Err != nil {
			t.Fatalf("%s: %v", who, reply.Err)
		}
		order = append(order, who)
		complete(t, streams[who], routed(t, streams[who], reply.Response))
	}
	if got, want := fmt.Sprint(order), "[crit x1 y1 x2]"; got != want {
		t.Fatalf("routed in order %s, want %s", got, want)
	}
	if f.g.FlowCount(10, requestpath.FlowDispatched) != 1 || f.g.FlowCount(0, requestpath.FlowDispatched) != 3 || f.g.FlowCount(-1, requestpath.FlowSheddable) != 1 {
		t.Errorf("flow counts: %d critical, %d default dispatched, %d shed", f.g.FlowCount(10, requestpath.FlowDispatched),
			f.g.FlowCount(0, requestpath.FlowDispatched), f.g.FlowCount(-1, requestpath.FlowSheddable))
	}
	for i := 1; i < 3; i++ {
		complete(t, held[i], dests[i])
	}
	f.settled(t)
}

// Through the fake Envoy: a stream reset while its request waits takes it
// out of the queue; a request still waiting at its TTL is answered 429
// with Retry-After and its stream closed.
func TestFlowControlTTLAndResetThroughFakeEnvoy(t *testing.T) {
	f := newFlowE2E(t)
	held, dests := f.hold(t)
	gone, _ := f.queue(t, 10, "", "a", 1)
	gone.Cancel()
	waitFor(t, "the reset request out of the queue", func() (bool, any) { return f.g.Queued() == 0, f.g.Queued() })
	late, reply := f.queue(t, 11, "", "a", 1)
	f.clk.Advance(10 * time.Second)
	f.g.Dispatch()
	r := <-reply
	if r.Err != nil || et.Describe(r.Response) != "immediate 429 retry-after=1" {
		t.Fatalf("after the TTL: %v %v", r.Response, r.Err)
	}
	late.Closed()
	if f.g.FlowCount(0, requestpath.FlowGone) != 1 || f.g.FlowCount(0, requestpath.FlowExpired) != 1 {
		t.Errorf("flow counts: %d gone, %d expired", f.g.FlowCount(0, requestpath.FlowGone), f.g.FlowCount(0, requestpath.FlowExpired))
	}
	for i := range held {
		complete(t, held[i], dests[i])
	}
	f.settled(t)
}
