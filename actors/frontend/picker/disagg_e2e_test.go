package picker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// newDisaggE2E is the real router following four simulated engines of a
// disaggregated fleet — 1 and 2 decode, 3 and 4 prefill — with the picker
// in front and the fake Envoy connected to it.
func newDisaggE2E(t *testing.T) *e2e {
	t.Helper()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Timeout: 2 * time.Second, Routing: routing.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	f := &e2e{svc: svc}
	for i, role := range []string{api.RoleDecode, api.RoleDecode, api.RolePrefill, api.RolePrefill} {
		e, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: 16, CapacityBlocks: 4096})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		f.engines = append(f.engines, e)
		f.serving = append(f.serving, fmt.Sprintf("127.0.0.%d:8000", i+1))
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: e.Endpoint(),
			ReplayEndpoint: e.ReplayEndpoint(), ModelName: "m", BlockSize: 16, ServingEndpoint: f.serving[i], Role: role}); err != nil {
			t.Fatal(err)
		}
	}
	f.path = requestpath.New(svc, requestpath.Config{MaxCandidates: 3, Metrics: &requestpath.Metrics{Front: "epp"}})
	_, f.envoy = startPicker(t, FromPath(f.path), Config{Ready: svc.Ready})
	return f
}

// loads is every rank's booked (prefill tokens, blocks), idle ones left
// out (GET /loads, which covers both legs).
func (f *e2e) loads(t *testing.T) map[messages.WorkerID][2]uint64 {
	t.Helper()
	spaces, err := f.svc.Loads(context.Background(), api.LoadsFilter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[messages.WorkerID][2]uint64{}
	for _, ns := range spaces {
		for _, l := range ns.Loads {
			if l.PotentialPrefillTokens+l.PotentialDecodeBlocks+l.ActiveRequests > 0 {
				out[l.WorkerID] = [2]uint64{l.PotentialPrefillTokens, l.PotentialDecodeBlocks}
			}
		}
	}
	return out
}

// Through the fake Envoy: a long cold prompt is split — the destination a
// decode endpoint, x-prefiller-host-port the prefill endpoint holding its
// prefix; the prefill booking ends at the decode leg's first byte, the
// decode booking at the end. A warm decode worker gets no remote prefill
// and no header, and a client's own x-prefiller-host-port is removed.
// Subset hints apply to the decode endpoint.
func TestDisaggregatedThroughFakeEnvoy(t *testing.T) {
	f := newDisaggE2E(t)
	cold, warm := prompt(1000, 64), prompt(9000, 64) // 1,024 tokens each
	f.cache(t, 3, cold[:32*16])                      // prefill worker 4 holds half of the cold prompt
	f.cache(t, 0, warm)                              // decode worker 1 holds all of the warm one
	n := func(p []uint32) string { return fmt.Sprint(len(body(p))) }
	decode := func(answer string, prefill string, p []uint32, among ...int) int {
		t.Helper()
		for _, i := range among {
			want := "req_headers dest=" + f.serving[i]
			if prefill != "" {
				want += " prefiller=" + prefill
			}
			if answer == want+" len="+n(p)+" clear meta="+f.serving[i] {
				return i
			}
		}
		t.Fatalf("answer %q: want a decode endpoint of %v with prefiller %q", answer, among, prefill)
		return -1
	}

	h := f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil), et.RequestBody(body(cold), true))
	d := decode(et.Describe(h.Recv()), f.serving[3], cold, 0, 1)
	h.Expect("req_body streamed=" + n(cold) + " eos")
	dw := messages.WorkerID(d + 1)
	waitFor(t, "both legs booked: the prefill worker's uncached half, the decode worker's blocks", func() (bool, any) {
		b := f.loads(t)
		return len(b) == 2 && b[4] == [2]uint64{512, 0} && b[dw] == [2]uint64{0, 64}, b
	})
	h.Send(et.ResponseHeaders("200", f.serving[d], false), et.ResponseBody("data: {}\n\n", false, ""))
	h.Expect("resp_headers", "resp_body streamed=10")
	waitFor(t, "the prefill leg freed at the decode leg's first byte", func() (bool, any) {
		b := f.loads(t)
		return len(b) == 1 && b[dw] == [2]uint64{0, 64}, b
	})
	h.Send(et.ResponseBody("data: [DONE]\n\n", true, ""))
	h.Expect("resp_body streamed=14 eos")
	h.Finish()
	waitFor(t, "nothing booked", func() (bool, any) { b := f.loads(t); return len(b) == 0 && f.path.InFlight() == 0, b })

	// Warm: decode worker 1, no header; the client's header is removed.
	h = f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil, "x-prefiller-host-port", "10.6.6.6:1"), et.RequestBody(body(warm), true))
	h.Expect("req_headers dest="+f.serving[0]+" len="+n(warm)+" -x-prefiller-host-port clear meta="+f.serving[0], "req_body streamed="+n(warm)+" eos")
	h.Send(et.ResponseHeaders("200", f.serving[0], false), et.ResponseBody("{}", true, ""))
	h.Expect("resp_headers", "resp_body streamed=2 eos")
	h.Finish()
	waitFor(t, "nothing booked", func() (bool, any) { b := f.loads(t); return len(b) == 0 && f.path.InFlight() == 0, b })

	// A subset hint of decode worker 2 only: the split's destination is
	// there, the prefill endpoint unchanged. (A new prompt sharing the
	// cached half: the first split's decode worker is now predicted to
	// hold the whole cold prompt, which would make it warm.)
	cold2 := append(cold[:32*16:32*16], prompt(20000, 32)...)
	h = f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, et.SubsetHint(f.serving[1])), et.RequestBody(body(cold2), true))
	decode(et.Describe(h.Recv()), f.serving[3], cold2, 1)
	h.Expect("req_body streamed=" + n(cold2) + " eos")
	h.Cancel()
	waitFor(t, "a reset frees both legs", func() (bool, any) { b := f.loads(t); return len(b) == 0 && f.path.InFlight() == 0, b })

	// A subset that holds only prefill endpoints: no decode endpoint, 503.
	h = f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, et.SubsetHint(f.serving[2], f.serving[3])), et.RequestBody(body(cold), true))
	if got := et.Describe(h.Recv()); !strings.HasPrefix(got, "immediate 503") {
		t.Errorf("prefill-only subset: %q", got)
	}
	h.Closed()
	waitFor(t, "nothing booked", func() (bool, any) { b := f.loads(t); return len(b) == 0 && f.path.InFlight() == 0, b })
}
