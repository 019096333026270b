package requestpath

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// engineHealth is a fake network: the status each host:port answers on
// GET /health (0: the connection is refused).
type engineHealth struct {
	mu     sync.Mutex
	status map[string]int
	paths  []string
}

func (e *engineHealth) set(hostPort string, status int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status[hostPort] = status
}

func (e *engineHealth) RoundTrip(r *http.Request) (*http.Response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.paths = append(e.paths, r.URL.Path)
	st := e.status[r.URL.Host]
	if st == 0 {
		return nil, errors.New("connection refused")
	}
	return &http.Response{StatusCode: st, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

func endpoints(hps ...string) []serving.Endpoint {
	var out []serving.Endpoint
	for _, hp := range hps {
		out = append(out, serving.Endpoint{HostPort: hp})
	}
	return out
}

// An endpoint failing 3 checks in a row leaves the candidates and its
// breaker opens; 2 passed checks bring it back, its breaker half-open for
// probes. /workers and the metrics show it.
func TestHealthChecksTakeEndpointsOut(t *testing.T) {
	ctx := context.Background()
	net := &engineHealth{status: map[string]int{"h1:1": 503, "h2:1": 200}}
	g := newGuard(t, frontendtest.NewClock(), GuardConfig{Health: &HealthConfig{Client: &http.Client{Transport: net}}})
	p := New(&fakeBackend{answer: threeWorkers()}, Config{Guard: g})
	first := func() (string, int) {
		t.Helper()
		b, err := p.Route(ctx, Request{ID: "r", Model: "m", Tokens: []uint32{1}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Done(ctx)
		return b.Candidates[0].Endpoint.HostPort, len(b.Candidates)
	}
	for i := range 2 {
		g.CheckHealth(ctx, endpoints("h1:1", "h2:1"))
		if ep, _ := first(); ep != "h1:1" || !g.Healthy("h1:1") {
			t.Fatalf("after %d failed checks: first candidate %s, healthy %v", i+1, ep, g.Healthy("h1:1"))
		}
	}
	g.CheckHealth(ctx, endpoints("h1:1", "h2:1"))
	if ep, n := first(); ep != "h2:1" || n != 1 {
		t.Fatalf("after 3 failed checks: first candidate %s of %d, want h2:1 alone", ep, n)
	}
	if in, _ := g.BreakerInfo("h1:1"); in.State != guard.Open {
		t.Fatalf("breaker %v, want open", in.State)
	}
	h := g.RankHealth(api.RankInfo{ServingEndpoint: "http://h1:1"})
	if h == nil || h.Healthy || h.ConsecutiveFailures != 3 || h.Checks != 3 || h.LastError != "status 503" {
		t.Fatalf("/workers health %+v", h)
	}
	net.set("h1:1", 200)
	g.CheckHealth(ctx, endpoints("h1:1", "h2:1"))
	if g.Healthy("h1:1") {
		t.Fatal("healthy after one passed check, want two")
	}
	g.CheckHealth(ctx, endpoints("h1:1", "h2:1"))
	if ep, _ := first(); ep != "h1:1" {
		t.Fatalf("after 2 passed checks: first candidate %s, want h1:1 back", ep)
	}
	var sb strings.Builder
	if err := g.WriteMetrics(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kvrouter_health_checks_total{result="failed"} 3`, `kvrouter_health_checks_total{result="passed"} 7`,
		`kvrouter_health_transitions_total{to="unhealthy"} 1`, `kvrouter_health_transitions_total{to="healthy"} 1`,
		"kvrouter_health_unhealthy_endpoints 0\n", `kvrouter_breaker_transitions_total{to="open"} 1`, `kvrouter_breaker_transitions_total{to="half_open"} 1`} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, sb.String())
		}
	}
	var ms strings.Builder
	_ = p.WriteMetrics(&ms)
	if !strings.Contains(ms.String(), `reason="unhealthy"} 1`) {
		t.Errorf("the skip is not counted:\n%s", ms.String())
	}
	net.set("h2:1", 0)
	for range 3 {
		g.CheckHealth(ctx, endpoints("h2:1"))
	}
	if h := g.RankHealth(api.RankInfo{ServingEndpoint: "h2:1"}); h == nil || h.Healthy || h.LastError != "unreachable" {
		t.Fatalf("refused connections: %+v", h)
	}
	if g.RankHealth(api.RankInfo{ServingEndpoint: "h1:1"}) != nil {
		t.Fatal("an endpoint no longer listed is still tracked")
	}
	for _, path := range net.paths {
		if path != "/health" {
			t.Fatalf("checked %s", path)
		}
	}
}

// Over real HTTP: 2xx passes, another status or a server gone fails.
func TestHealthCheckOverHTTP(t *testing.T) {
	var mu sync.Mutex
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(status)
	}))
	hs := newHealthState(&HealthConfig{Path: "/healthz"})
	ep, err := serving.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if why := hs.check(context.Background(), ep); why != "" {
		t.Fatalf("200: %q", why)
	}
	mu.Lock()
	status = http.StatusServiceUnavailable
	mu.Unlock()
	if why := hs.check(context.Background(), ep); why != "status 503" {
		t.Fatalf("503: %q", why)
	}
	srv.Close()
	if why := hs.check(context.Background(), ep); why != "unreachable" {
		t.Fatalf("closed: %q", why)
	}
}
