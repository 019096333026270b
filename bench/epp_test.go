package bench

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/picker"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
)

// stubCore answers every request with the same endpoints: what is left is
// the picker's own cost (gRPC, the protocol, the body's JSON).
type stubCore struct{}

func (stubCore) Pick(context.Context, picker.Request) (picker.Choice, error) {
	return picker.Choice{Endpoints: []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"}}, nil
}
func (stubCore) Served(context.Context, string, string) error { return nil }
func (stubCore) FirstByte(context.Context, string) error      { return nil }
func (stubCore) Done(context.Context, string) error           { return nil }

// servePicker runs a picker over core on a loopback port until the
// benchmark ends and connects a fake Envoy to it.
func servePicker(b *testing.B, core picker.Core) *et.Envoy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = picker.New(core, picker.Config{}).Serve(ctx, lis); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	return et.Dial(b, lis.Addr().String())
}

// eppDecisions drives one ext_proc stream per request, in FULL_DUPLEX_STREAMED
// mode as llm-d configures Envoy, and reports the decision latency: from
// opening the stream to the headers answer carrying the destination (what
// Envoy waits for before it connects upstream). The rest of the stream (body
// given back, a response, the close) runs untimed, so bookkeeping happens.
func eppDecisions(b *testing.B, envoy *et.Envoy, prompts [][]uint32) {
	bodies := make([]string, len(prompts))
	for i, p := range prompts {
		bodies[i] = fmt.Sprintf(`{"model":"m","prompt":%s,"stream":true}`, jsonIDs(p))
	}
	lat := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		body := bodies[i%len(bodies)]
		t0 := time.Now()
		s := envoy.Open()
		s.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil), et.RequestBody(body, true))
		if r := s.Recv(); r.GetRequestHeaders() == nil {
			b.Fatalf("first answer %s, want the request headers'", et.Describe(r))
		}
		lat = append(lat, time.Since(t0))
		for r := s.Recv(); !r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream(); r = s.Recv() {
		}
		s.Send(et.ResponseHeaders("200", "", false), et.ResponseBody("data: [DONE]\n\n", true, ""))
		s.Recv()
		s.Recv()
		s.Finish()
	}
	reportLatency(b, lat)
}

func jsonIDs(p []uint32) string {
	b := make([]byte, 0, len(p)*6+2)
	b = append(b, '[')
	for i, t := range p {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", t)
	}
	return string(append(b, ']'))
}

// BenchmarkEPPDecision measures the endpoint picker's decision latency
// (p50/p99) through a fake Envoy over loopback gRPC, with the trace's
// prompts as token-id completions: against a stub core (the picker's own
// cost: gRPC, the protocol, the body's JSON) and against the real router
// (BenchmarkRoute's fixture, through the shared request path), so the two
// sit beside BenchmarkRoute's in-process and HTTP figures.
func BenchmarkEPPDecision(b *testing.B) {
	f := newRouteFixture(b)
	b.Run("stub-core", func(b *testing.B) { eppDecisions(b, servePicker(b, stubCore{}), f.prompts) })
	b.Run("router", func(b *testing.B) {
		eppDecisions(b, servePicker(b, picker.FromPath(requestpath.New(f.svc, requestpath.Config{}))), f.prompts)
	})
}
