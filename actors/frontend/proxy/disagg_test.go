package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// splitBackend routes with the real service and splits every answer the
// router did not split itself: the decode leg is the service's choice,
// the prefill leg a simulated prefill engine (the router's split decision
// is not the proxy's to test). It records the bookkeeping calls in order.
type splitBackend struct {
	*service.Service
	leg   api.PrefillLeg
	mu    sync.Mutex
	calls []string
}

func (s *splitBackend) Route(ctx context.Context, req api.RouteRequest) (api.RouteResult, error) {
	res, err := s.Service.Route(ctx, req)
	if err != nil || res.PrefillWorker != nil {
		return res, err
	}
	leg := s.leg
	res.PrefillWorker = &leg
	res.Disaggregation = &api.Disaggregation{Split: true, Reason: api.DisaggAlways}
	return res, nil
}

func (s *splitBackend) PrefillDone(ctx context.Context, id string) error {
	s.note("prefill_done " + id)
	return s.Service.PrefillDone(ctx, id)
}

func (s *splitBackend) MovePrefill(ctx context.Context, model, tenant, id string, to messages.WorkerKey) error {
	s.note(fmt.Sprintf("move_prefill %s → %d", id, to.Worker))
	return s.Service.MovePrefill(ctx, model, tenant, id, to)
}

func (s *splitBackend) Free(ctx context.Context, id string) error {
	s.note("free " + id)
	return s.Service.Free(ctx, id)
}

func (s *splitBackend) note(c string) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *splitBackend) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// tap sits in front of a simulated engine: it records every body it is
// sent, can answer a status itself instead (fail), can hold a request
// until the client goes away (hold, signalling arrived), and can answer
// as answer says.
type tap struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []string
	fail    atomic.Int32
	hold    atomic.Bool
	arrived chan struct{}
	answer  atomic.Pointer[answerFunc]
}

// answerFunc answers a tap's request in the engine's stead; pass hands the
// request on to the engine, its answer written to w.
type answerFunc func(w http.ResponseWriter, pass func(w http.ResponseWriter))

func newTap(t *testing.T, engine string) *tap {
	hop := engineHop(engine)
	tp := &tap{arrived: make(chan struct{}, 8)}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tp.mu.Lock()
		tp.bodies = append(tp.bodies, string(body))
		tp.mu.Unlock()
		if tp.hold.Load() {
			tp.arrived <- struct{}{}
			<-r.Context().Done()
			return
		}
		if answer := tp.answer.Load(); answer != nil {
			(*answer)(w, func(w http.ResponseWriter) { hop(w, r, body) })
			return
		}
		if code := tp.fail.Load(); code != 0 {
			http.Error(w, "unavailable", int(code))
			return
		}
		hop(w, r, body)
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

// answerWith makes the tap answer as a says.
func (tp *tap) answerWith(a answerFunc) { tp.answer.Store(&a) }

func (tp *tap) addr() string { return tp.srv.Listener.Addr().String() }

func (tp *tap) seen() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.bodies)
}

// splitFleet is kvrouter's service with one simulated decode engine
// registered (worker 1), a simulated prefill engine (worker 9, known to
// the router only as the prefill leg) of protocol proto, a tap in front
// of each, the request path over a splitBackend and the proxy.
type splitFleet struct {
	*fleet
	be       *splitBackend
	tr       *simengine.Transfer
	pre, dec *tap
	decHTTP  *simengine.HTTPServer
}

// ones is the proxy's random source in these tests: every room and
// request id is 0x0101…01 >> 1.
type ones struct{}

func (ones) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 1
	}
	return len(b), nil
}

const onesID = "36170086419038336" // 0x0101010101010101 >> 1

func newSplitFleet(t *testing.T, proto string, hold func(context.Context), opts Options) *splitFleet {
	t.Helper()
	svc := newService(t)
	tr := simengine.NewTransfer()
	sim := func(d *simengine.DisaggOptions, hold func(context.Context)) (*simengine.Engine, *simengine.HTTPServer) {
		return simEngine(t, simengine.HTTPOptions{CompletionTokens: 3, Hold: hold, Disagg: d})
	}
	_, preHTTP := sim(&simengine.DisaggOptions{Role: simengine.RolePrefill, Protocol: proto, Transfer: tr, BootstrapHost: "127.0.0.1",
		BootstrapPort: 8998, EngineID: "e-pre"}, nil)
	dec, decHTTP := sim(&simengine.DisaggOptions{Role: simengine.RoleDecode, Protocol: proto, Transfer: tr}, hold)
	sf := &splitFleet{tr: tr, pre: newTap(t, preHTTP.ServingEndpoint()), dec: newTap(t, decHTTP.ServingEndpoint()), decHTTP: decHTTP}
	if err := svc.Register(context.Background(), api.Registration{InstanceID: 1, Endpoint: dec.Endpoint(), ReplayEndpoint: dec.ReplayEndpoint(),
		ModelName: "m", TenantID: api.DefaultTenant, ServingEndpoint: sf.dec.addr()}); err != nil {
		t.Fatal(err)
	}
	sf.be = &splitBackend{Service: svc, leg: api.PrefillLeg{WorkerID: 9, ServingEndpoint: sf.pre.addr(), BootstrapPort: 8998}}
	sf.fleet = &fleet{t: t, svc: svc, engines: []*simengine.Engine{dec}, https: []*simengine.HTTPServer{decHTTP}}
	opts.Disagg.Engines = func(id messages.WorkerID) string {
		if id == 9 {
			return proto
		}
		return ""
	}
	opts.Disagg.Rand = ones{}
	sf.serve(sf.be, requestpath.Config{}, opts)
	return sf
}

// The client's body: a streamed completion whose own kv_transfer_params
// try to point the decode engine elsewhere (they must never reach it).
var (
	splitPrompt = tokens(7, 9)
	splitClient = `{"model":"m","stream":true,"temperature":0.5,"prompt":` + splitPrompt +
		`,"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"10.6.6.6"}}`
	splitPlain = `{"model":"m","prompt":` + splitPrompt + `,"stream":true,"temperature":0.5}`
)

// booked is the bookkeeping of request id after a split request that
// reached its decode leg's first byte: prefill_done, then free.
func booked(id string) string { return fmt.Sprint([]string{"prefill_done " + id, "free " + id}) }

// For each engine's protocol, the prefill and decode engines get exactly
// the protocol's fields on both legs (and the client's transfer fields on
// neither), the decode engine takes the prompt over from the prefill
// engine and stores its blocks, the client gets the decode leg's stream,
// and the booking ends prefill_done (the decode leg's first byte), then
// free, with nothing left booked.
func TestSplitRunsTheEngineProtocol(t *testing.T) {
	p := splitPrompt
	for _, tc := range []struct {
		proto           string
		prefill, decode string
	}{
		{"vllm",
			`{"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_block_ids":null,"remote_engine_id":null,"remote_host":null,"remote_port":null},"max_tokens":1,"model":"m","prompt":` + p + `,"stream":false,"temperature":0.5}`,
			`{"kv_transfer_params":{"do_remote_decode":false,"do_remote_prefill":true,"remote_block_ids":[0,1],"remote_engine_id":"e-pre","remote_host":"127.0.0.1","remote_port":5600,"remote_request_id":"1","tp_size":1},"model":"m","prompt":` + p + `,"stream":true,"temperature":0.5}`},
		{"sglang",
			`{"bootstrap_host":"127.0.0.1","bootstrap_port":8998,"bootstrap_room":` + onesID + `,"model":"m","prompt":` + p + `,"stream":true,"temperature":0.5}`,
			`{"bootstrap_host":"127.0.0.1","bootstrap_port":8998,"bootstrap_room":` + onesID + `,"model":"m","prompt":` + p + `,"stream":true,"temperature":0.5}`},
		{"trtllm",
			`{"disaggregated_params":{"disagg_request_id":` + onesID + `,"request_type":"context_only"},"model":"m","prompt":` + p + `,"stream":false,"temperature":0.5}`,
			`{"disaggregated_params":{"ctx_request_id":1,"disagg_request_id":` + onesID + `,"encoded_opaque_state":"c2lt","first_gen_tokens":[7],"request_type":"generation_only"},"model":"m","prompt":` + p + `,"stream":true,"temperature":0.5}`},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			f := newSplitFleet(t, tc.proto, nil, Options{})
			resp, err := f.post(context.Background(), "/v1/completions", splitClient, RequestIDHeader, "r1")
			if err != nil {
				t.Fatal(err)
			}
			events, err := sseEvents(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || len(events) != 5 || events[4] != "[DONE]" || resp.Header.Get(WorkerHeader) != "1:0" {
				t.Fatalf("client got %d from %q: %q, %v", resp.StatusCode, resp.Header.Get(WorkerHeader), events, err)
			}
			if got := f.pre.seen(); len(got) != 1 || got[0] != tc.prefill {
				t.Errorf("prefill engine got\n%q\nwant\n%q", got, tc.prefill)
			}
			if got := f.dec.seen(); len(got) != 1 || got[0] != tc.decode {
				t.Errorf("decode engine got\n%q\nwant\n%q", got, tc.decode)
			}
			if st := f.tr.Stats(); st != (simengine.TransferStats{Prefills: 1, Decodes: 1}) || len(f.tr.Violations()) != 0 {
				t.Errorf("transfer %+v, violations %q", st, f.tr.Violations())
			}
			if n := f.engines[0].Stats().Blocks; n != 2 {
				t.Errorf("the decode engine holds %d blocks, want the prompt's 2", n)
			}
			if got := fmt.Sprint(f.be.seen()); got != booked("r1") {
				t.Errorf("bookkeeping %s, want %s", got, booked("r1"))
			}
			var m strings.Builder
			_ = f.path.WriteMetrics(&m)
			if !strings.Contains(m.String(), `kvrouter_request_path_hit_reports_total{front="",result="split"} 1`) {
				t.Errorf("the decode engine's usage went to the prediction check:\n%s", m.String())
			}
			f.idle()
		})
	}
}

// A vLLM prefill leg that fails (503) before any byte reached the client
// falls back to the decode worker alone, with the client's body as it was
// (but for its transfer fields): counted by reason, the booking back to
// zero. Configured to fail instead, the client gets 502 prefill_failed
// and the decode engine nothing.
func TestSplitPrefillFailure(t *testing.T) {
	m := testMetrics(t)
	f := newSplitFleet(t, "vllm", nil, Options{Meter: proxyMeter(m)})
	f.pre.fail.Store(http.StatusServiceUnavailable)
	resp, err := f.post(context.Background(), "/v1/completions", splitClient, RequestIDHeader, "r1")
	if err != nil {
		t.Fatal(err)
	}
	events, _ := sseEvents(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(events) != 5 {
		t.Fatalf("fallback answer %d %q", resp.StatusCode, events)
	}
	if got := f.dec.seen(); len(got) != 1 || got[0] != splitPlain {
		t.Fatalf("decode engine got %q, want the client's body %s", got, splitPlain)
	}
	if st := f.tr.Stats(); st.LocalDecodes != 1 || st.Prefills != 0 {
		t.Fatalf("transfer %+v: want one local prefill on the decode engine", st)
	}
	if got := fmt.Sprint(f.be.seen()); got != booked("r1") {
		t.Fatalf("bookkeeping %s", got)
	}
	f.idle()
	waitFor(t, "the split series on /metrics", func() (bool, any) {
		text := scrape(t, m)
		return series(text, "kvrouter_proxy_prefill_legs_total", `protocol="vllm"`, `outcome="bad_status"`) == 1 &&
			series(text, "kvrouter_proxy_prefill_fallbacks_total", `protocol="vllm"`, `reason="bad_status"`, `action="local"`) == 1 &&
			series(text, "kvrouter_proxy_client_transfer_fields_total", `field="kv_transfer_params"`) == 1, text
	})

	strict := newSplitFleet(t, "vllm", nil, Options{Disagg: DisaggOptions{OnPrefillFailure: PrefillFail}})
	strict.pre.fail.Store(http.StatusServiceUnavailable)
	resp, err = strict.post(context.Background(), "/v1/completions", splitClient, RequestIDHeader, "r2")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"code":"prefill_failed"`) || len(strict.dec.seen()) != 0 {
		t.Fatalf("with fail: %d %s, decode engine got %q", resp.StatusCode, body, strict.dec.seen())
	}
	if got := fmt.Sprint(strict.be.seen()); got != "[free r2]" {
		t.Fatalf("bookkeeping %s", got)
	}
	strict.idle()
}

// SGLang sends both legs at once: a prefill leg that fails while the
// decode leg waits for its room cancels the decode leg, and the client
// gets 502 prefill_failed (an SGLang decode engine cannot prefill alone).
func TestSplitSGLangPrefillFailure(t *testing.T) {
	f := newSplitFleet(t, "sglang", nil, Options{})
	f.pre.fail.Store(http.StatusServiceUnavailable)
	resp, err := f.post(context.Background(), "/v1/completions", splitClient, RequestIDHeader, "r1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"code":"prefill_failed"`) {
		t.Fatalf("client got %d %s", resp.StatusCode, body)
	}
	if got := fmt.Sprint(f.be.seen()); got != "[free r1]" {
		t.Fatalf("bookkeeping %s", got)
	}
	if v := f.tr.Violations(); len(v) != 0 {
		t.Fatalf("violations %q", v)
	}
	f.idle()
}

// A client that goes away during the prefill leg frees the booking (no
// decode leg is sent); one that goes away during the decode leg's stream
// frees it after its prefill_done.
func TestSplitClientCancel(t *testing.T) {
	f := newSplitFleet(t, "vllm", func(ctx context.Context) { <-ctx.Done() }, Options{})
	f.pre.hold.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		resp, err := f.post(ctx, "/v1/completions", splitClient, RequestIDHeader, "during-prefill")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-f.pre.arrived
	cancel()
	<-done
	waitFor(t, "the booking freed", func() (bool, any) { return fmt.Sprint(f.be.seen()) == "[free during-prefill]", f.be.seen() })
	if n := len(f.dec.seen()); n != 0 {
		t.Fatalf("the decode engine got %d requests after the client left", n)
	}
	f.idle()

	f.pre.hold.Store(false)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	resp, err := f.post(ctx, "/v1/completions", splitClient, RequestIDHeader, "during-decode")
	if err != nil {
		t.Fatal(err)
	}
	if line, err := readLine(resp.Body); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	cancel()
	resp.Body.Close()
	want := "[free during-prefill prefill_done during-decode free during-decode]"
	waitFor(t, "the booking freed", func() (bool, any) { return fmt.Sprint(f.be.seen()) == want, f.be.seen() })
	f.idle()
}

// A decode engine that dies mid-stream ends the client's stream with an
// error; the booking, prefill_done at its first byte, is freed.
func TestSplitDecodeFailure(t *testing.T) {
	holding := make(chan struct{}, 4)
	f := newSplitFleet(t, "trtllm", func(ctx context.Context) {
		holding <- struct{}{}
		<-ctx.Done()
	}, Options{})
	resp, err := f.post(context.Background(), "/v1/completions", splitClient, RequestIDHeader, "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-holding
	f.decHTTP.Kill()
	body, err := io.ReadAll(resp.Body)
	if err == nil || !bytes.Contains(body, []byte(`"code":"engine_died"`)) {
		t.Fatalf("after the decode engine died: %q, %v", body, err)
	}
	if got := fmt.Sprint(f.be.seen()); got != booked("r1") {
		t.Fatalf("bookkeeping %s", got)
	}
	if st := f.tr.Stats(); st.Prefills != 1 || st.Decodes != 1 {
		t.Fatalf("transfer %+v", st)
	}
	f.idle()
}

// readLine reads one line of a streamed answer.
func readLine(r io.Reader) (string, error) {
	var sb strings.Builder
	b := make([]byte, 1)
	for {
		if _, err := r.Read(b); err != nil {
			return sb.String(), err
		}
		sb.WriteByte(b[0])
		if b[0] == '\n' {
			return sb.String(), nil
		}
	}
}

// Each leg of a split request is a span under the request's: the prefill
// leg's with its worker and outcome, the decode leg's around the forward.
func TestSplitLegSpans(t *testing.T) {
	exp := spantest.Install(t, nil)
	f := newSplitFleet(t, "vllm", nil, Options{})
	resp, err := f.post(context.Background(), "/v1/completions", splitClient)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var req, pre, dec tracetest.SpanStubs
	waitFor(t, "the request's and its legs' spans", func() (bool, any) {
		req, pre, dec = spantest.ByName(exp, "POST /v1/completions"), spantest.ByName(exp, SpanPrefill), spantest.ByName(exp, SpanDecode)
		return len(req) == 1 && len(pre) == 1 && len(dec) == 1, fmt.Sprint(len(req), len(pre), len(dec))
	})
	for _, leg := range []tracetest.SpanStub{pre[0], dec[0]} {
		if leg.Parent.SpanID() != req[0].SpanContext.SpanID() {
			t.Errorf("span %s is not under the request's", leg.Name)
		}
	}
	attrs := map[string]string{}
	for _, kv := range pre[0].Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["kvrouter.prefill_outcome"] != "ok" || attrs["kvrouter.protocol"] != "vllm" || attrs["kvrouter.worker_id"] != "9" {
		t.Errorf("prefill span attributes %v", attrs)
	}
	f.idle()
}

// A split request whose prefill worker's engine has no known protocol
// (none registered, none detected) is served by its decode worker alone, with the
// client's body; the prefill engine is not called.
func TestSplitUnknownProtocolServesLocally(t *testing.T) {
	f := newSplitFleet(t, "vllm", nil, Options{})
	f.be.leg.WorkerID = 5 // the fleet's Engines knows worker 9 only
	resp, err := f.post(context.Background(), "/v1/completions", splitClient, RequestIDHeader, "r1")
	if err != nil {
		t.Fatal(err)
	}
	events, _ := sseEvents(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(events) != 5 || len(f.pre.seen()) != 0 {
		t.Fatalf("answer %d %q, prefill engine got %q", resp.StatusCode, events, f.pre.seen())
	}
	if got := f.dec.seen(); len(got) != 1 || got[0] != splitPlain || f.tr.Stats().LocalDecodes != 1 {
		t.Fatalf("decode engine got %q (transfer %+v)", got, f.tr.Stats())
	}
	if got := fmt.Sprint(f.be.seen()); got != booked("r1") {
		t.Fatalf("bookkeeping %s", got)
	}
	f.idle()
}
