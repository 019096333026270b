package service

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/telemetry"
	"github.com/kvrouter/kvrouter/actors/telemetry/metricstest"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// newServed is a kvrouter as serve runs it — a 2-shard index per
// namespace, /route recorded in the metrics, /metrics serving them with
// the HTTP counters — with simulated engines registered as workers 1…n of
// model "llama".
func newServed(t *testing.T, engines int) *harness {
	t.Helper()
	svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second,
		SessionCredit: 1, Pipeline: pipeline.Config{Index: indexer.Config{Shards: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	m, err := telemetry.NewMetrics(svc, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	srv := httptest.NewServer(svc.Handler(m, httpapi.Options{}))
	t.Cleanup(srv.Close)
	h := &harness{t: t, url: srv.URL, svc: svc}
	for i := range engines {
		h.engines = append(h.engines, h.register(i+1, "llama", 4))
	}
	return h
}

// register starts a simulated engine (block size 4) and registers it as
// worker id of model with the given block size.
func (h *harness) register(id int, model string, blockSize int) *simengine.Engine {
	h.t.Helper()
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		BlockSize: 4, CapacityBlocks: 256})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { eng.Close() })
	code, body := h.post("/register", map[string]any{"instance_id": id, "endpoint": eng.Endpoint(),
		"replay_endpoint": eng.ReplayEndpoint(), "model_name": model, "block_size": blockSize})
	if code != http.StatusCreated {
		h.t.Fatalf("register: %d %s", code, body)
	}
	return eng
}

// postWith POSTs body with extra headers and returns the status.
func (h *harness) postWith(path string, body any, header http.Header) int {
	h.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", h.url+path, bytes.NewReader(b))
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// routeSpans are the spans one traced /route recorded, by name.
func routeSpans(t *testing.T, exp *tracetest.InMemoryExporter) (server tracetest.SpanStub, children map[string]tracetest.SpanStubs) {
	t.Helper()
	servers := spantest.ByName(exp, "POST /route")
	if len(servers) != 1 {
		t.Fatalf("%d server spans named POST /route, want 1", len(servers))
	}
	server, children = servers[0], map[string]tracetest.SpanStubs{}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.SpanID() == server.SpanContext.SpanID() {
			continue
		}
		if s.SpanContext.TraceID() != server.SpanContext.TraceID() {
			t.Errorf("span %s is in another trace than the request's", s.Name)
			continue
		}
		if s.Parent.SpanID() != server.SpanContext.SpanID() {
			t.Errorf("span %s's parent %v is not the server span", s.Name, s.Parent.SpanID())
		}
		children[s.Name] = append(children[s.Name], s)
	}
	return server, children
}

// One /route is one trace: the HTTP server span (named by the route
// pattern) with hashing, one lookup per index shard, the session credit
// and the decision as its children; an incoming traceparent header is
// continued; probes and scrapes are not traced.
func TestRouteIsOneTrace(t *testing.T) {
	h := newServed(t, 2)
	h.engines[1].Serve(prompt(1, 6), "conv-1")
	h.settle()
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{}) // as telemetry.StartTracing does
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	exp := spantest.Install(t, nil) // after settling: no ingest spans

	body := map[string]any{"token_ids": append(prompt(1, 6), 9), "model_name": "llama", "request_id": "req-1", "session_id": "conv-1"}
	if code := h.postWith("/route", body, http.Header{"Content-Type": {"application/json"}}); code != http.StatusOK {
		t.Fatalf("route: %d", code)
	}
	server, children := routeSpans(t, exp)
	if server.Parent.IsValid() {
		t.Errorf("the server span has a parent %v without a traceparent header", server.Parent)
	}
	for name, want := range map[string]int{SpanHash: 1, indexer.SpanLookup: 2, SpanSessionCredit: 1, routing.SpanDecide: 1} {
		if got := len(children[name]); got != want {
			t.Errorf("%d %s spans, want %d", got, name, want)
		}
	}
	if len(children) != 4 {
		t.Errorf("child spans %v, want only hash, lookups, session credit and decision", slices.Sorted(maps.Keys(children)))
	}
	decide := map[string]int64{}
	for _, kv := range children[routing.SpanDecide][0].Attributes {
		decide[string(kv.Key)] = kv.Value.AsInt64()
	}
	if decide["kvrouter.worker_id"] != 2 || decide["kvrouter.overlap_blocks"] < 6 || decide["kvrouter.candidates"] != 2 {
		t.Errorf("decision attributes %v: want worker 2, overlap ≥ 6, 2 candidates", decide)
	}
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, "conv-1") || strings.Contains(v, "req-1") {
				t.Errorf("span %s carries a session or request id: %s=%s", s.Name, kv.Key, v)
			}
		}
	}

	// A caller's traceparent: the request joins the caller's trace.
	exp.Reset()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body["request_id"] = "req-2"
	hdr := http.Header{"Content-Type": {"application/json"}, "Traceparent": {"00-" + traceID + "-" + parentID + "-01"}}
	if code := h.postWith("/route", body, hdr); code != http.StatusOK {
		t.Fatalf("route: %d", code)
	}
	server, children = routeSpans(t, exp)
	if server.SpanContext.TraceID().String() != traceID || server.Parent.SpanID().String() != parentID {
		t.Errorf("server span in trace %v under %v, want the caller's %s/%s",
			server.SpanContext.TraceID(), server.Parent.SpanID(), traceID, parentID)
	}
	if len(children[indexer.SpanLookup]) != 2 || len(children[routing.SpanDecide]) != 1 {
		t.Errorf("continued trace's children %v, want 2 lookups and a decision", slices.Sorted(maps.Keys(children)))
	}

	// Span names carry the route pattern, never the request id.
	exp.Reset()
	if code := h.postWith("/route/req-1/free", nil, nil); code != http.StatusOK {
		t.Fatalf("free: %d", code)
	}
	if n := len(spantest.ByName(exp, "POST /route/{request_id}/free")); n != 1 {
		var names []string
		for _, s := range exp.GetSpans() {
			names = append(names, s.Name)
		}
		t.Errorf("free spans %v, want one named by its pattern", names)
	}

	// Probes and scrapes are not traced.
	exp.Reset()
	if code, _ := h.do("GET", "/healthz"); code != http.StatusOK {
		t.Fatalf("healthz: %d", code)
	}
	h.scrape()
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("a probe and a scrape recorded %d spans, want none", n)
	}
}

// scrape GETs /metrics and parses it as Prometheus text.
func (h *harness) scrape() map[string]*dto.MetricFamily {
	h.t.Helper()
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	return metricstest.Parse(h.t, resp.Body)
}

// /metrics follows the engines' events: counters move as batches flow,
// rejections are counted by reason, the route and HTTP figures are there,
// and no session or request id is ever a label.
func TestMetricsFollowTheEngines(t *testing.T) {
	h := newServed(t, 2)
	h.engines[0].Serve(prompt(1, 6), "conv-a")
	h.engines[1].Serve(prompt(2, 6), "")
	h.settle()
	h.route(append(prompt(1, 6), 5), "conv-a", "req-a", false)
	// Worker 3's engine makes blocks of 4 tokens; it is registered with 8.
	odd := h.register(3, "other", 8)
	odd.Serve(prompt(3, 6), "")
	var fams map[string]*dto.MetricFamily
	h.await("worker 3's rejected events", func() bool {
		_ = odd.Publish()
		fams = h.scrape()
		n, _ := metricstest.Sample(fams, "kvrouter_events_total", map[string]string{"worker": "3", "outcome": "rejected", "reason": "block_size_mismatch"})
		return n > 0
	})
	w1 := map[string]string{"worker": "1", "dp_rank": "0"}
	many := math.Inf(1)
	for _, c := range []struct {
		name     string
		labels   map[string]string
		min, max float64
	}{
		{"kvrouter_batches_total", w1, 1, many},
		{"kvrouter_events_total", map[string]string{"worker": "1", "kind": "stored", "outcome": "accepted"}, 1, many},
		{"kvrouter_worker_state", map[string]string{"worker": "1", "state": "exact"}, 1, 1},
		{"kvrouter_worker_state", map[string]string{"worker": "3", "state": "exact"}, 0, 0},
		{"kvrouter_sessions", nil, 1, 1},
		{"kvrouter_session_events_total", map[string]string{"reason": "unattributed"}, 1, many},
		{"kvrouter_sessions_dropped_total", map[string]string{"reason": "evicted"}, 0, 0},
		{"kvrouter_recoveries_total", w1, 0, 0},
		{"kvrouter_route_duration_seconds", nil, 1, 1},
		{"kvrouter_route_cached_tokens_ratio", nil, 1, 1},
		{"kvrouter_http_requests_total", map[string]string{"path": "/register", "code": "201"}, 3, 3},
		{"kvrouter_http_requests_total", map[string]string{"path": "/route", "code": "200"}, 1, 1},
		{"kvrouter_telemetry_read_errors_total", nil, 0, 0},
	} {
		if got, ok := metricstest.Sample(fams, c.name, c.labels); !ok || got < c.min || got > c.max {
			t.Errorf("%s%v = %v (present %v), want within [%v, %v]", c.name, c.labels, got, ok, c.min, c.max)
		}
	}
	blocks0, _ := metricstest.Sample(fams, "kvrouter_index_blocks", map[string]string{"shard": "0"})
	blocks1, _ := metricstest.Sample(fams, "kvrouter_index_blocks", map[string]string{"shard": "1"})
	if blocks0+blocks1 < 12 { // two 6-block prompts, at least
		t.Errorf("index blocks %v + %v, want ≥ 12", blocks0, blocks1)
	}
	for name, fam := range fams {
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if v := l.GetValue(); strings.Contains(v, "conv-a") || strings.Contains(v, "req-a") {
					t.Errorf("%s has a session or request id as a label: %s=%s", name, l.GetName(), v)
				}
			}
		}
	}

	// More batches: the counter moves.
	before, _ := metricstest.Sample(fams, "kvrouter_batches_total", w1)
	h.engines[0].Serve(prompt(4, 3), "")
	h.await("worker 1's batches to grow", func() bool {
		_ = h.engines[0].Publish()
		after, _ := metricstest.Sample(h.scrape(), "kvrouter_batches_total", w1)
		return after > before
	})
}

// await polls cond until it holds (eventually.True).
func (h *harness) await(what string, cond func() bool) {
	h.t.Helper()
	eventually.True(h.t, what, func() (bool, string) { return cond(), "not yet" })
}
