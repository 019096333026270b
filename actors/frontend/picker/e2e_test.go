package picker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// e2e is the real router (service, index, route actors) following three
// simulated engines, with the picker in front of it over the shared request
// path, and a fake Envoy connected to the picker.
type e2e struct {
	svc     *service.Service
	path    *requestpath.Path
	engines []*simengine.Engine
	serving []string // each engine's serving endpoint
	envoy   *et.Envoy
}

// newE2E starts the fixture. With withHTTP each engine serves its OpenAI
// surface at its serving endpoint; without, the endpoints are addresses
// nothing listens on (the fake Envoy then only reads where the picker
// sends a request).
func newE2E(t *testing.T, cfg Config, withHTTP bool) *e2e {
	t.Helper()
	return newGuardedE2E(t, cfg, withHTTP, nil)
}

// newGuardedE2E is newE2E with the request path's Guard g (nil: none).
func newGuardedE2E(t *testing.T, cfg Config, withHTTP bool, g *requestpath.Guard) *e2e {
	t.Helper()
	return newPathE2E(t, cfg, withHTTP, requestpath.Config{Guard: g})
}

// newPathE2E is newE2E with the request path's configuration pc (its
// candidates and metrics set here).
func newPathE2E(t *testing.T, cfg Config, withHTTP bool, pc requestpath.Config) *e2e {
	t.Helper()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Timeout: 2 * time.Second, Routing: routing.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	f := &e2e{svc: svc}
	for i := range 3 {
		e, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: 16, CapacityBlocks: 4096})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		f.engines = append(f.engines, e)
		serving := fmt.Sprintf("127.0.0.%d:8000", i+1)
		if withHTTP {
			h, err := e.ServeHTTP("127.0.0.1:0", simengine.HTTPOptions{Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			serving = h.ServingEndpoint()
		}
		f.serving = append(f.serving, serving)
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: e.Endpoint(),
			ReplayEndpoint: e.ReplayEndpoint(), ModelName: "m", BlockSize: 16, ServingEndpoint: serving}); err != nil {
			t.Fatal(err)
		}
	}
	pc.MaxCandidates, pc.Metrics = 3, &requestpath.Metrics{Front: "epp"}
	f.path = requestpath.New(svc, pc)
	cfg.Ready = svc.Ready
	_, f.envoy = startPicker(t, FromPath(f.path), cfg)
	return f
}

// prompt is n blocks of distinct token ids starting at base.
func prompt(base, blocks int) []uint32 {
	p := make([]uint32, blocks*16)
	for i := range p {
		p[i] = uint32(base + i)
	}
	return p
}

func body(p []uint32) string {
	s := `{"model":"m","stream":true,"prompt":[`
	for i, t := range p {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(t)
	}
	return s + `]}`
}

// cache makes engine i serve p and waits until the index knows it.
func (f *e2e) cache(t *testing.T, i int, p []uint32) {
	t.Helper()
	f.engines[i].Serve(p, "")
	waitFor(t, fmt.Sprintf("engine %d's prefix in the index", i), func() (bool, any) {
		// A heartbeat shows a batch lost to a late subscription as a gap,
		// which the replay fills.
		_ = f.engines[i].Publish()
		q, err := f.svc.Query(context.Background(), api.QueryRequest{TokenIDs: p, ModelName: "m"})
		got := q.Scores[messages.WorkerID(i+1)][0]
		return err == nil && got == uint64(len(p)), q.Scores
	})
}

// booked is the load every rank has booked (a probe route, freed).
func (f *e2e) booked(t *testing.T) map[messages.WorkerID][2]uint64 {
	t.Helper()
	res, err := f.svc.Route(context.Background(), api.RouteRequest{TokenIDs: []uint32{1}, ModelName: "m", RequestID: "probe", IncludeScores: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Free(context.Background(), "probe"); err != nil {
		t.Fatal(err)
	}
	out := map[messages.WorkerID][2]uint64{}
	for _, s := range res.Scores {
		if s.ActivePrefillTokens+s.ActiveDecodeBlocks > 0 {
			out[s.WorkerID] = [2]uint64{s.ActivePrefillTokens, s.ActiveDecodeBlocks}
		}
	}
	return out
}

// settled waits until nothing is booked and no booking is in flight.
func (f *e2e) settled(t *testing.T) {
	t.Helper()
	waitFor(t, "bookkeeping back to zero", func() (bool, any) {
		b := f.booked(t)
		return len(b) == 0 && f.path.InFlight() == 0, fmt.Sprint(b, " in flight ", f.path.InFlight())
	})
}

// TestEndToEndThroughFakeEnvoy sends requests through the fake Envoy to
// the picker over the real router: each lands on the engine caching its
// prefix, a retry's served endpoint takes the booking, a reset frees it,
// and nothing stays booked.
func TestEndToEndThroughFakeEnvoy(t *testing.T) {
	f := newE2E(t, Config{}, false)
	servingOf := func(i int) string { return f.serving[i] }
	p2, p3 := prompt(1000, 8), prompt(5000, 8)
	f.cache(t, 1, p2)
	f.cache(t, 2, p3)
	n := func(p []uint32) string { return fmt.Sprint(len(body(p))) }

	// FULL_DUPLEX_STREAMED: the prefix cached on engine 1 goes there.
	h := f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil), et.RequestBody(body(p2), true))
	h.Expect("req_headers dest="+servingOf(1)+" len="+n(p2)+" clear meta="+servingOf(1), "req_body streamed="+n(p2)+" eos")
	h.Send(et.ResponseHeaders("200", servingOf(1), false))
	h.Expect("resp_headers")
	waitFor(t, "the request booked on engine 1 (fully cached: blocks, no prefill)", func() (bool, any) {
		b := f.booked(t)
		return b[2][1] > 0 && len(b) == 1, b
	})
	h.Send(et.ResponseBody("data: {}\n\n", false, ""), et.ResponseBody("data: [DONE]\n\n", true, ""))
	h.Expect("resp_body streamed=10", "resp_body streamed=14 eos")
	h.Finish()
	f.settled(t)

	// BUFFERED: the same, the destination in the body's answer.
	h = f.envoy.Open()
	h.Send(et.RequestHeaders(&et.Buffered, "/v1/completions", false, nil))
	h.Expect("req_headers")
	h.Send(et.RequestBody(body(p3), true))
	h.Expect("req_body dest=" + servingOf(2) + " clear meta=" + servingOf(2))
	h.Send(et.ResponseHeaders("200", servingOf(2), false))
	h.Expect("resp_headers")
	h.Send(et.ResponseBody("{}", true, ""))
	h.Expect("resp_body")
	h.Finish()
	f.settled(t)

	// A retry: engine 1 was chosen, engine 0 served; the booking moves
	// there; the client goes away mid-response and the booking is freed.
	h = f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil), et.RequestBody(body(p2), true))
	h.Expect("req_headers dest="+servingOf(1)+" len="+n(p2)+" clear meta="+servingOf(1), "req_body streamed="+n(p2)+" eos")
	h.Send(et.ResponseHeaders("200", servingOf(0), false), et.ResponseBody("data: {}\n\n", false, ""))
	h.Expect("resp_headers", "resp_body streamed=10")
	waitFor(t, "the booking moved to engine 0, in decode", func() (bool, any) {
		b := f.booked(t)
		return len(b) == 1 && b[1][0] == 0 && b[1][1] > 0, b
	})
	h.Cancel()
	f.settled(t)

	// A subset hint without engine 1, which caches the prompt (the
	// router's choice): one of the others, booked where it is sent.
	h = f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, et.SubsetHint(servingOf(0), servingOf(2))), et.RequestBody(body(p2), true))
	first := et.Describe(h.Recv())
	dest := -1
	for _, i := range []int{0, 2} {
		if first == "req_headers dest="+servingOf(i)+" len="+n(p2)+" clear meta="+servingOf(i) {
			dest = i
		}
	}
	if dest < 0 {
		t.Fatalf("answer %q is not an endpoint of the subset", first)
	}
	h.Expect("req_body streamed=" + n(p2) + " eos")
	waitFor(t, "the booking on the subset's endpoint, before any served report", func() (bool, any) {
		b := f.booked(t)
		_, on := b[messages.WorkerID(dest+1)]
		return len(b) == 1 && on, b
	})
	h.Send(et.ResponseHeaders("200", servingOf(dest), false), et.ResponseBody("{}", true, ""))
	h.Expect("resp_headers", "resp_body streamed=2 eos")
	h.Finish()
	f.settled(t)

	// A subset of endpoints no worker serves: 503.
	h = f.envoy.Open()
	h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, et.SubsetHint("10.9.9.9:1")), et.RequestBody(body(p3), true))
	h.Expect("immediate 503")
	h.Closed()
	f.settled(t)
}

// forward is the rest of Envoy's work for one request the picker answered:
// send the body it gave back to the destination, stream the engine's
// answer back over the ext_proc stream (response headers with the served
// endpoint, each chunk as read), close. It returns what the engine sent.
func (f *e2e) forward(t *testing.T, h *et.Stream, dest, body string) string {
	t.Helper()
	resp, err := http.Post("http://"+dest+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h.Send(et.ResponseHeaders(fmt.Sprint(resp.StatusCode), dest, false))
	h.Expect("resp_headers")
	var got strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			got.Write(buf[:n])
			h.Send(et.ResponseBody(string(buf[:n]), false, ""))
			h.Expect(fmt.Sprintf("resp_body streamed=%d", n))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	h.Send(et.ResponseBody("", true, ""))
	h.Expect("resp_body streamed=0 eos")
	h.Finish()
	return got.String()
}

// cachedTokens reads usage.prompt_tokens_details.cached_tokens from the
// last event of an SSE answer that carries usage.
func cachedTokens(t *testing.T, sse string) int {
	t.Helper()
	cached := -1
	for _, line := range strings.Split(sse, "\n") {
		var ev struct {
			Usage *struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil && ev.Usage != nil {
			cached = ev.Usage.Details.Cached
		}
	}
	if cached < 0 {
		t.Fatalf("no usage in the answer:\n%s", sse)
	}
	return cached
}

// TestEndToEndEnvoyToEngines closes the loop: the fake Envoy forwards each
// request where the picker said, to simulated engines serving OpenAI over
// HTTP from their prefix caches and publishing what they stored. A
// conversation's second turn goes to the engine that served the first and
// finds its prefix cached there, as the router predicted and the engine's
// usage reports; every booking is freed.
func TestEndToEndEnvoyToEngines(t *testing.T) {
	f := newE2E(t, Config{}, true)
	turn1 := prompt(100, 8)
	turn2 := append(append([]uint32(nil), turn1...), prompt(900, 4)...)
	ask := func(p []uint32) (dest int, cached int) {
		t.Helper()
		h := f.envoy.Open()
		b := body(p)
		h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil), et.RequestBody(b, true))
		first := et.Describe(h.Recv())
		dest = -1
		for i, ep := range f.serving {
			if first == fmt.Sprintf("req_headers dest=%s len=%d clear meta=%s", ep, len(b), ep) {
				dest = i
			}
		}
		if dest < 0 {
			t.Fatalf("answer %q names no engine of %v", first, f.serving)
		}
		given := h.Recv().GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if string(given.GetBody()) != b || !given.GetEndOfStream() {
			t.Fatalf("body given back: %d bytes (end %v), want the request's %d", len(given.GetBody()), given.GetEndOfStream(), len(b))
		}
		return dest, cachedTokens(t, f.forward(t, h, f.serving[dest], b))
	}
	d1, c1 := ask(turn1)
	if c1 != 0 {
		t.Fatalf("first turn found %d tokens cached on a fresh engine", c1)
	}
	f.settled(t)
	waitFor(t, "the first turn's blocks in the index", func() (bool, any) {
		_ = f.engines[d1].Publish()
		q, err := f.svc.Query(context.Background(), api.QueryRequest{TokenIDs: turn1, ModelName: "m"})
		return err == nil && q.Scores[messages.WorkerID(d1+1)][0] == uint64(len(turn1)), q.Scores
	})
	d2, c2 := ask(turn2)
	if d2 != d1 || c2 != len(turn1) {
		t.Fatalf("second turn went to engine %d with %d tokens cached; want engine %d with %d", d2, c2, d1, len(turn1))
	}
	f.settled(t)
	// The picker read each answer's usage as it streamed through: the
	// prediction check saw both turns, the router's prediction equal to
	// what the engine reported.
	waitFor(t, "both answers' usage in the prediction check", func() (bool, any) {
		ws, err := f.svc.Workers(context.Background())
		if err != nil {
			return false, err
		}
		for _, w := range ws {
			if int(w.InstanceID) == d1+1 {
				c := w.Ranks[0].HitCheck
				return c != nil && c.Reports == 2 && c.ReportedTokens == uint64(c1+c2) && c.PredictedTokens == c.ReportedTokens && !c.Flagged, c
			}
		}
		return false, ws
	})
}
