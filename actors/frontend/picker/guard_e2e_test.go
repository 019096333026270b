package picker

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
)

func newTestGuard(t *testing.T, clk *frontendtest.Clock, cfg requestpath.GuardConfig) *requestpath.Guard {
	t.Helper()
	cfg.Now, cfg.Sleep = clk.Now, clk.Sleep
	g, err := requestpath.NewGuard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// pick sends one full-duplex request through the fake Envoy and returns
// where the picker sent it; the engine's answer is status, reported in
// the response headers as Envoy does (with the served endpoint).
func (f *e2e) pick(t *testing.T, p []uint32, status string) string {
	t.Helper()
	h := f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil), et.RequestBody(body(p), true))
	first := h.Recv()
	dest := string(first.GetRequestHeaders().GetResponse().GetHeaderMutation().GetSetHeaders()[0].GetHeader().GetRawValue())
	if want := fmt.Sprintf("req_headers dest=%s len=%d clear meta=%s", dest, len(body(p)), dest); et.Describe(first) != want {
		t.Fatalf("answer %q, want %q", et.Describe(first), want)
	}
	h.Expect(fmt.Sprintf("req_body streamed=%d eos", len(body(p))))
	h.Send(et.ResponseHeaders(status, dest, false), et.ResponseBody("{}", true, ""))
	h.Expect("resp_headers", "resp_body streamed=2 eos")
	h.Finish()
	return dest
}

// Through the fake Envoy: the engine caching the prompts answers 503 (as
// Envoy reports it in the response headers); after 3 its breaker opens and
// the picker sends the next requests elsewhere; after the cool-down a
// probe goes back, and 2 answered 200 close the breaker.
func TestBreakerThroughFakeEnvoy(t *testing.T) {
	clk := frontendtest.NewClock()
	g := newTestGuard(t, clk, requestpath.GuardConfig{Breaker: guard.BreakerConfig{Failures: 3, ErrorRate: -1, CoolDown: 10 * time.Second, Successes: 2}})
	f := newGuardedE2E(t, Config{}, false, g)
	sick := f.serving[1]
	p := prompt(1000, 8)
	f.cache(t, 1, p)
	for i := range 3 {
		if dest := f.pick(t, p, "503"); dest != sick {
			t.Fatalf("request %d went to %s, want the engine caching it (%s)", i, dest, sick)
		}
	}
	if in, _ := g.BreakerInfo(sick); in.State != guard.Open {
		t.Fatalf("breaker %v after 3 answers 503, want open", in.State)
	}
	for i := range 5 {
		if dest := f.pick(t, p, "200"); dest == sick {
			t.Fatalf("request %d went to the open breaker's engine", i)
		}
	}
	clk.Advance(10 * time.Second)
	for i := range 2 {
		if dest := f.pick(t, p, "200"); dest != sick {
			t.Fatalf("probe %d went to %s, want %s", i, dest, sick)
		}
	}
	if in, _ := g.BreakerInfo(sick); in.State != guard.Closed {
		t.Fatalf("breaker %v after 2 probes answered 200, want closed", in.State)
	}
	f.settled(t)
}

// Through the fake Envoy: a fairness id over its rate limit is answered
// 429 with Retry-After at once; another fairness id is routed.
func TestRateLimitThroughFakeEnvoy(t *testing.T) {
	clk := frontendtest.NewClock()
	g := newTestGuard(t, clk, requestpath.GuardConfig{Limits: requestpath.Limits{Default: requestpath.Limit{RequestsPerSecond: 1}}})
	f := newGuardedE2E(t, Config{}, false, g)
	p := prompt(1000, 2)
	open := func(id string) *et.Stream {
		h := f.envoy.Open()
		h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil, "x-gateway-inference-fairness-id", id), et.RequestBody(body(p), true))
		return h
	}
	h := open("a")
	if d := et.Describe(h.Recv()); d[:len("req_headers dest=")] != "req_headers dest=" {
		t.Fatalf("first request of a: %q", d)
	}
	h.Cancel()
	h = open("a")
	h.Expect("immediate 429 retry-after=1")
	h.Closed()
	h = open("b")
	if d := et.Describe(h.Recv()); d[:len("req_headers dest=")] != "req_headers dest=" {
		t.Fatalf("request of b while a is limited: %q", d)
	}
	h.Cancel()
	f.settled(t)
}
