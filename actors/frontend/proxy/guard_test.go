package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// flaky is a fake engine in front of a simulated one: while failing it
// answers every request with status at once (a fast-failing engine);
// otherwise it passes requests to the simulated engine.
type flaky struct {
	srv     *httptest.Server
	failing atomic.Bool
	status  int
	hits    atomic.Int64
}

func newFlaky(t *testing.T, status int, healthy string) *flaky {
	t.Helper()
	hop := engineHop(healthy)
	fl := &flaky{status: status}
	fl.failing.Store(true)
	fl.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fl.hits.Add(1)
		if fl.failing.Load() {
			http.Error(w, `{"error":{"message":"engine overloaded"}}`, fl.status)
			return
		}
		hop(w, r, nil)
	}))
	t.Cleanup(fl.srv.Close)
	return fl
}

// reserve points worker w's serving endpoint at ep (same KV stream).
func (f *fleet) reserve(w int, ep string) {
	f.t.Helper()
	ctx := context.Background()
	if err := f.svc.Unregister(ctx, api.WorkerRef{InstanceID: messages.WorkerID(w), ModelName: "m"}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.svc.Register(ctx, api.Registration{InstanceID: messages.WorkerID(w), Endpoint: f.engines[w-1].Endpoint(),
		ReplayEndpoint: f.engines[w-1].ReplayEndpoint(), ModelName: "m", TenantID: api.DefaultTenant, ServingEndpoint: ep}); err != nil {
		f.t.Fatal(err)
	}
}

// warm stores prompt on worker w's engine and waits until the index has
// it: the router then prefers w for prompts with that prefix.
func (f *fleet) warm(w int, prompt []uint32) {
	f.t.Helper()
	f.engines[w-1].Serve(prompt, "")
	if err := f.engines[w-1].Publish(); err != nil {
		f.t.Fatal(err)
	}
	f.settle()
}

// complete posts one completion and returns its status, serving worker
// and body.
func (f *fleet) complete(prompt []uint32, hdr ...string) (int, string, string, http.Header) {
	f.t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "m", "prompt": prompt})
	resp, err := f.post(context.Background(), "/v1/completions", string(b), hdr...)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(WorkerHeader), string(body), resp.Header
}

func newTestGuard(t *testing.T, clk *frontendtest.Clock, cfg requestpath.GuardConfig) *requestpath.Guard {
	t.Helper()
	cfg.Now, cfg.Sleep, cfg.Rand = clk.Now, clk.Sleep, func() float64 { return 0.75 }
	g, err := requestpath.NewGuard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A fast-failing engine (503 at once) holding the prompts' prefixes is the
// router's choice every time, and without a breaker each request pays a
// failed attempt there. With one: after 3 failures (each retried on the
// next best, the client never sees them) it opens and gets no traffic;
// after the cool-down one probe at a time goes through, and 2 successes
// close it — the engine serves again.
func TestProxyBreakerStopsAFastFailingEngine(t *testing.T) {
	clk := frontendtest.NewClock()
	g := newTestGuard(t, clk, requestpath.GuardConfig{
		Breaker: guard.BreakerConfig{Failures: 3, ErrorRate: -1, CoolDown: 10 * time.Second, Successes: 2}, RetryMin: 100})
	f := newGuardedFleet(t, 3, nil, Options{}, requestpath.Config{Guard: g})
	fl := newFlaky(t, http.StatusServiceUnavailable, f.https[0].ServingEndpoint())
	f.reserve(1, fl.srv.Listener.Addr().String())
	// Each prompt is cached on worker 1 alone before it is sent (a worker
	// that serves a prompt caches it too).
	prompt := func(i int) []uint32 {
		p := ids(100+i, 16)
		f.warm(1, p)
		return p
	}
	for i := range 3 {
		if code, w, body, _ := f.complete(prompt(i)); code != 200 || w == "1:0" {
			t.Fatalf("request %d while the engine fails: %d from %q: %s", i, code, w, body)
		}
	}
	if n := fl.hits.Load(); n != 3 {
		t.Fatalf("the failing engine got %d requests, want 3 (it must be the router's choice)", n)
	}
	if in, _ := g.BreakerInfo(fl.srv.Listener.Addr().String()); in.State != guard.Open {
		t.Fatalf("breaker %v after 3 failures, want open", in.State)
	}
	for i := range 10 {
		if code, w, body, _ := f.complete(prompt(10 + i)); code != 200 || w == "1:0" {
			t.Fatalf("request %d while open: %d from %q: %s", i, code, w, body)
		}
	}
	if n := fl.hits.Load(); n != 3 {
		t.Fatalf("the open breaker let %d requests through", n-3)
	}
	if got := f.path.Metrics().Count("retries", "status_503", ""); got != 3 {
		t.Errorf("retries on status_503: %d, want 3", got)
	}
	for _, d := range clk.Sleeps() { // n = 1, u = 0.75: 50 ms × (1 + 0.2 × 0.5)
		if d != 55*time.Millisecond {
			t.Errorf("backoff %v, want 55ms", d)
		}
	}
	fl.failing.Store(false)
	clk.Advance(10 * time.Second)
	for i := range 2 {
		if code, w, body, _ := f.complete(prompt(30 + i)); code != 200 || w != "1:0" {
			t.Fatalf("probe %d: %d from %q: %s", i, code, w, body)
		}
	}
	if in, _ := g.BreakerInfo(fl.srv.Listener.Addr().String()); in.State != guard.Closed {
		t.Fatalf("breaker %v after 2 successful probes, want closed", in.State)
	}
	for _, to := range []guard.BreakerState{guard.Open, guard.HalfOpen, guard.Closed} {
		if n := g.BreakerTransitions(to); n != 1 {
			t.Errorf("%d transitions to %v, want 1", n, to)
		}
	}
	f.idle()
}

// Retries stay within the attempt cap and the fleet-wide budget: every
// engine answers 503; with 2 attempts the client gets the second 503; once
// the budget (1 retry, no share of the requests) is spent a request gets
// its first 503 with no retry, counted.
func TestProxyRetriesWithinCapAndBudget(t *testing.T) {
	clk := frontendtest.NewClock()
	g := newTestGuard(t, clk, requestpath.GuardConfig{BreakerOff: true, RetryRatio: -1, RetryMin: 1})
	f := newGuardedFleet(t, 3, nil, Options{Attempts: 2}, requestpath.Config{Guard: g})
	var fls []*flaky
	for w := 1; w <= 3; w++ {
		fl := newFlaky(t, http.StatusServiceUnavailable, f.https[w-1].ServingEndpoint())
		f.reserve(w, fl.srv.Listener.Addr().String())
		fls = append(fls, fl)
	}
	hits := func() (n int64) {
		for _, fl := range fls {
			n += fl.hits.Load()
		}
		return n
	}
	if code, _, _, _ := f.complete(ids(1, 8)); code != http.StatusServiceUnavailable || hits() != 2 {
		t.Fatalf("first request: %d after %d attempts, want 503 after 2", code, hits())
	}
	if got := f.path.Metrics().Count("retries_refused", "attempts", ""); got != 1 {
		t.Errorf("refused for attempts: %d, want 1", got)
	}
	if code, _, _, _ := f.complete(ids(2, 8)); code != http.StatusServiceUnavailable || hits() != 3 {
		t.Fatalf("second request: %d, %d attempts in all, want 503 after 1 more (budget spent)", code, hits())
	}
	if got := f.path.Metrics().Count("retries_refused", "budget", ""); got != 1 {
		t.Errorf("refused for the budget: %d, want 1", got)
	}
	if got := f.path.Metrics().Count("retries", "status_503", ""); got != 1 {
		t.Errorf("retries: %d, want 1", got)
	}
	f.idle()
}

// A tenant (fairness id) over its requests/s limit gets 429 rate_limited
// with Retry-After in OpenAI's error shape; another tenant is unaffected;
// the limited one passes again once its bucket refilled.
func TestProxyRateLimitPerKey(t *testing.T) {
	clk := frontendtest.NewClock()
	g := newTestGuard(t, clk, requestpath.GuardConfig{Limits: requestpath.Limits{
		Default: requestpath.Limit{RequestsPerSecond: 0.5, RequestBurst: 2},
		Keys:    map[string]requestpath.Limit{"big": {RequestsPerSecond: 100}},
	}})
	f := newGuardedFleet(t, 2, nil, Options{}, requestpath.Config{Guard: g})
	as := func(key string) []string { return []string{"x-gateway-inference-fairness-id", key} }
	for i := range 2 {
		if code, _, body, _ := f.complete(ids(i, 8), as("a")...); code != 200 {
			t.Fatalf("tenant a request %d within its burst: %d %s", i, code, body)
		}
	}
	code, _, body, hdr := f.complete(ids(3, 8), as("a")...)
	var e struct {
		Error struct{ Type, Code string }
	}
	_ = json.Unmarshal([]byte(body), &e)
	if code != http.StatusTooManyRequests || e.Error.Code != "rate_limited" || e.Error.Type != "rate_limit_error" || hdr.Get("Retry-After") != "2" {
		t.Fatalf("tenant a over its limit: %d Retry-After %q %s", code, hdr.Get("Retry-After"), body)
	}
	for i := range 5 {
		if code, _, body, _ := f.complete(ids(10+i, 8), "x-llm-d-inference-fairness-id", "big"); code != 200 {
			t.Fatalf("tenant big request %d: %d %s", i, code, body)
		}
	}
	if code, _, body, _ := f.complete(ids(20, 8), as("b")...); code != 200 {
		t.Fatalf("tenant b while a is limited: %d %s", code, body)
	}
	clk.Advance(2 * time.Second)
	if code, _, body, _ := f.complete(ids(21, 8), as("a")...); code != 200 {
		t.Fatalf("tenant a after its bucket refilled: %d %s", code, body)
	}
	if got := f.path.Metrics().Count("decisions", requestpath.OutcomeRateLimited, ""); got != 1 {
		t.Errorf("rate_limited decisions: %d, want 1", got)
	}
	f.idle()
}
