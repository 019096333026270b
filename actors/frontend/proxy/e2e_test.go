package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// fleet is kvrouter's service, simulated engines with their OpenAI
// surface registered as serving endpoints, the request path and the proxy
// in front (an httptest server).
type fleet struct {
	t       *testing.T
	svc     *service.Service
	engines []*simengine.Engine
	https   []*simengine.HTTPServer
	path    *requestpath.Path
	url     string
}

const blockSize = 4

func newFleet(t *testing.T, n int, hold func(context.Context), opts Options) *fleet {
	t.Helper()
	return newGuardedFleet(t, n, hold, opts, requestpath.Config{})
}

// newGuardedFleet is newFleet with the request path's configuration pc
// (its Guard, its overload threshold).
func newGuardedFleet(t *testing.T, n int, hold func(context.Context), opts Options, pc requestpath.Config) *fleet {
	t.Helper()
	svc := newService(t)
	f := &fleet{t: t, svc: svc}
	for i := range n {
		eng, hs := simEngine(t, simengine.HTTPOptions{CompletionTokens: 3, Hold: hold})
		f.engines, f.https = append(f.engines, eng), append(f.https, hs)
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: eng.Endpoint(),
			ReplayEndpoint: eng.ReplayEndpoint(), ModelName: "m", TenantID: api.DefaultTenant, ServingEndpoint: hs.ServingEndpoint()}); err != nil {
			t.Fatal(err)
		}
	}
	f.serve(svc, pc, opts)
	return f
}

// newService is kvrouter's service, closed with the test.
func newService(t *testing.T) *service.Service {
	t.Helper()
	return newRoutingService(t, routing.DefaultConfig())
}

// newRoutingService is newService routing by rc.
func newRoutingService(t *testing.T, rc routing.Config) *service.Service {
	t.Helper()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: blockSize, Routing: rc, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

// simEngine is a simulated engine with its OpenAI surface, closed with
// the test.
func simEngine(t *testing.T, ho simengine.HTTPOptions) (*simengine.Engine, *simengine.HTTPServer) {
	t.Helper()
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: blockSize, CapacityBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	hs, err := eng.ServeHTTP("127.0.0.1:0", ho)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	return eng, hs
}

// serve waits for the engines' streams, then puts the request path over
// be and the proxy in front of it.
func (f *fleet) serve(be requestpath.Backend, pc requestpath.Config, opts Options) {
	f.t.Helper()
	f.settle()
	f.path = requestpath.New(be, pc)
	p, err := New(f.path, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	f.t.Cleanup(srv.Close)
	f.url = srv.URL
}

var waitFor = frontendtest.WaitFor

// engineHop is a test hop in front of the engine at addr, as the fake
// engine fronts (recorder, flaky, tap) put one: it passes a request on
// with the body it was given (nil: read from the request). The body is
// held in memory before the engine is called: Go's HTTP/1 server closes a
// request's body once its handler writes the response, and a body
// streamed through the hop could still be waiting for its EOF then — the
// hop's transport would fail the write and cut the engine's answer
// mid-stream.
func engineHop(addr string) func(w http.ResponseWriter, r *http.Request, body []byte) {
	u, _ := url.Parse("http://" + addr)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		if body == nil {
			body, _ = io.ReadAll(r.Body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}
}

// settle waits until every engine's stream is followed up to its last
// batch.
func (f *fleet) settle() { frontendtest.Settle(f.t, f.svc, f.engines) }

// idle waits until nothing is booked: no booking in flight in the request
// path, no load on any worker in the router (probed by a route that is
// freed again).
func (f *fleet) idle() {
	f.t.Helper()
	waitFor(f.t, "bookkeeping back to zero", func() (bool, any) {
		if n := f.path.InFlight(); n != 0 {
			return false, fmt.Sprintf("%d bookings in flight", n)
		}
		res, err := f.svc.Route(context.Background(), api.RouteRequest{TokenIDs: []uint32{1}, ModelName: "m", TenantID: api.DefaultTenant,
			RequestID: "probe", IncludeScores: true})
		if err != nil {
			return false, err.Error()
		}
		_ = f.svc.Free(context.Background(), "probe")
		for _, sc := range res.Scores {
			if sc.ActiveDecodeBlocks != 0 || sc.ActivePrefillTokens != 0 {
				return false, fmt.Sprintf("load %+v", res.Scores)
			}
		}
		return true, ""
	})
}

func (f *fleet) post(ctx context.Context, path, body string, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return http.DefaultClient.Do(req)
}

func tokens(seed, n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(seed*1000 + i)
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// sseEvents reads a streamed answer's data lines.
func sseEvents(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out, sc.Err()
}

// A prompt goes to the engine that cached its prefix: after one request
// stored it somewhere, a longer prompt with that prefix lands there and
// reports the cached tokens; the stream comes through whole and the
// bookkeeping is back to zero after every answer.
func TestProxyRoutesToTheCachedPrefix(t *testing.T) {
	f := newFleet(t, 3, nil, Options{})
	ctx := context.Background()
	resp, err := f.post(ctx, "/v1/completions", `{"model":"m","stream":true,"prompt":`+tokens(1, 16)+`}`, RequestIDHeader, "first")
	if err != nil {
		t.Fatal(err)
	}
	events, err := sseEvents(resp.Body)
	resp.Body.Close()
	first := resp.Header.Get(WorkerHeader)
	if err != nil || resp.StatusCode != 200 || len(events) != 5 || events[4] != "[DONE]" || resp.Header.Get(RequestIDHeader) != "first" || first == "" {
		t.Fatalf("first answer %d %v (%v), headers %v", resp.StatusCode, events, err, resp.Header)
	}
	f.idle()
	var w, r int
	fmt.Sscanf(first, "%d:%d", &w, &r)
	waitFor(t, "the index holds the first prompt", func() (bool, any) {
		q, err := f.svc.Query(ctx, api.QueryRequest{TokenIDs: ids(1, 16), ModelName: "m", TenantID: api.DefaultTenant})
		return err == nil && q.Scores[messages.WorkerID(w)][0] == 16, fmt.Sprint(q, err)
	})
	for i := range 4 {
		resp, err := f.post(ctx, "/v1/completions", fmt.Sprintf(`{"model":"m","stream":true,"prompt":%s}`, tokens(1, 16+4*(i+1))))
		if err != nil {
			t.Fatal(err)
		}
		events, _ := sseEvents(resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get(WorkerHeader); got != first || len(events) != 5 || !strings.Contains(events[3], `"cached_tokens":`) {
			t.Errorf("request %d went to %s, want %s (events %v)", i, got, first, events)
		}
		if strings.Contains(events[3], `"cached_tokens":0`) {
			t.Errorf("request %d: no cached tokens: %s", i, events[3])
		}
		f.idle()
	}
}

func ids(seed, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(seed*1000 + i)
	}
	return out
}

// A client that goes away mid-stream cancels the engine's request and
// frees its booking.
func TestProxyClientCancelFreesTheLoad(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	f := newFleet(t, 2, func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-release:
		}
	}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := f.post(ctx, "/v1/completions", `{"model":"m","stream":true,"prompt":`+tokens(2, 8)+`}`)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	if f.path.InFlight() != 1 {
		t.Fatalf("%d in flight while streaming", f.path.InFlight())
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the engine's request cancelled", func() (bool, any) {
		a := f.https[0].Active() + f.https[1].Active()
		return a == 0, fmt.Sprintf("%d engine requests active", a)
	})
	f.idle()
}

// An engine that dies mid-stream ends the client's stream with an error
// (an SSE error event, then a broken-off response) and frees the booking.
func TestProxyEngineDeathEndsTheStreamAndFrees(t *testing.T) {
	holding := make(chan struct{}, 4)
	release := make(chan struct{})
	defer close(release)
	f := newFleet(t, 1, func(ctx context.Context) {
		holding <- struct{}{}
		select {
		case <-ctx.Done():
		case <-release:
		}
	}, Options{})
	resp, err := f.post(context.Background(), "/v1/completions", `{"model":"m","stream":true,"prompt":`+tokens(3, 8)+`}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-holding // the engine sent its first token and holds the stream
	f.https[0].Kill()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("the stream ended cleanly after the engine died: %q", body)
	}
	if !bytes.Contains(body, []byte(`"code":"engine_died"`)) {
		t.Errorf("no error event in %q", body)
	}
	f.idle()
}

// A worker whose serving endpoint refuses connections is passed over for
// the next best; the booking follows the worker that served, and each
// failed connection is counted against the worker that failed.
func TestProxyRetriesTheNextBestWorker(t *testing.T) {
	m := testMetrics(t)
	f := newFleet(t, 2, nil, Options{Meter: proxyMeter(m)})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	ctx := context.Background()
	if err := f.svc.Unregister(ctx, api.WorkerRef{InstanceID: 1, ModelName: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Register(ctx, api.Registration{InstanceID: 1, Endpoint: f.engines[0].Endpoint(), ModelName: "m", TenantID: api.DefaultTenant,
		ServingEndpoint: deadAddr}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		resp, err := f.post(ctx, "/v1/completions", fmt.Sprintf(`{"model":"m","prompt":%s}`, tokens(10+i, 8)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(WorkerHeader) != "2:0" {
			t.Fatalf("request %d: %d from %q: %s", i, resp.StatusCode, resp.Header.Get(WorkerHeader), body)
		}
	}
	n := f.path.Metrics().Count("bookkeeping", "rebook", requestpath.ResultOK)
	if n == 0 {
		t.Errorf("no request was routed to the dead worker first (rebooked %d): the test proves nothing", n)
	}
	f.idle()
	waitFor(t, "one connect failure of worker 1 per rebooked request on /metrics", func() (bool, any) {
		text := scrape(t, m)
		return series(text, "kvrouter_proxy_errors_total", `worker="1"`, `dp_rank="0"`, `reason="connect_failed"`) == float64(n), text
	})
}

// Models, auth, refusals: what the proxy answers itself.
func TestProxyAnswersItself(t *testing.T) {
	f := newFleet(t, 1, nil, Options{APIToken: "s3cret"})
	ctx := context.Background()
	auth := []string{"Authorization", "Bearer s3cret"}
	for _, c := range []struct {
		name, path, body string
		hdr              []string
		status           int
		want             string
	}{
		{"no token", "/v1/completions", `{"model":"m","prompt":[1]}`, nil, 401, `"code":"missing_token"`},
		{"wrong token", "/v1/completions", `{"model":"m","prompt":[1]}`, []string{"Authorization", "Bearer nope"}, 401, `"code":"invalid_token"`},
		{"unknown model", "/v1/completions", `{"model":"x","prompt":[1]}`, auth, 404, `"code":"unknown_namespace"`},
		{"no model", "/v1/completions", `{"prompt":[1]}`, auth, 400, `"code":"missing_field"`},
		{"bad prompt", "/v1/completions", `{"model":"m","prompt":{}}`, auth, 400, `"code":"invalid_value"`},
		{"not JSON", "/v1/chat/completions", `nope`, auth, 400, `"code":"bad_json"`},
		{"chat by load", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, auth, 200, `"chat.completion"`},
		{"text by load", "/v1/completions", `{"model":"m","prompt":"hello"}`, auth, 200, `"text_completion"`},
	} {
		resp, err := f.post(ctx, c.path, c.body, c.hdr...)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d with %s", c.name, resp.StatusCode, body, c.status, c.want)
		}
	}
	if n := f.path.Metrics().Count("routed_by_load", NoTokenIDs, ""); n != 2 {
		t.Errorf("routed by load: %d, want 2 (chat, text)", n)
	}
	req, _ := http.NewRequest(http.MethodGet, f.url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 1 || models.Data[0].ID != "m" {
		t.Errorf("models %+v", models)
	}
	f.idle()
}

// One span per request, in the caller's trace (traceparent), naming the
// worker that served.
func TestProxySpanContinuesTraceparent(t *testing.T) {
	exp := spantest.Install(t, nil)
	f := newFleet(t, 1, nil, Options{})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp, err := f.post(context.Background(), "/v1/completions", `{"model":"m","prompt":[1,2,3]}`,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var spans tracetest.SpanStubs
	waitFor(t, "the request's span", func() (bool, any) {
		spans = spantest.ByName(exp, "POST /v1/completions")
		return len(spans) == 1, fmt.Sprint(len(spans), " spans")
	})
	sp := spans[0]
	if sp.SpanContext.TraceID().String() != traceID || sp.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("span in trace %s under %s, want the traceparent's", sp.SpanContext.TraceID(), sp.Parent.SpanID())
	}
	worker := false
	for _, kv := range sp.Attributes {
		worker = worker || (kv.Key == tracectx.Worker && kv.Value.AsInt64() == 1)
	}
	if !worker {
		t.Errorf("span attributes %v lack the worker", sp.Attributes)
	}
	f.idle()
}
