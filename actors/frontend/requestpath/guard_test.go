package requestpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
	"github.com/kvrouter/kvrouter/messages/api"
)

func newGuard(t *testing.T, clk *frontendtest.Clock, cfg GuardConfig) *Guard {
	t.Helper()
	cfg.Now = clk.Now
	cfg.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	g, err := NewGuard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// route routes one request and reports what its first candidate did.
func route(t *testing.T, p *Path, id string, r EndpointResult) *Booking {
	t.Helper()
	b, err := p.Route(context.Background(), Request{ID: id, Model: "m", Tokens: []uint32{1}})
	if err != nil {
		t.Fatal(err)
	}
	b.Report(0, r)
	b.Done(context.Background())
	return b
}

// A candidate whose breaker is open is skipped (counted); with every
// candidate's open the answer is ErrBreakersOpen, a 503 ErrNoEndpoint; a
// half-open breaker's single probe slot goes to one request at a time.
func TestRouteSkipsOpenBreakers(t *testing.T) {
	clk := frontendtest.NewClock()
	g := newGuard(t, clk, GuardConfig{Breaker: guard.BreakerConfig{Failures: 2, ErrorRate: -1, CoolDown: time.Minute, Successes: 1}})
	be := &fakeBackend{answer: threeWorkers()}
	p := New(be, Config{Guard: g})
	route(t, p, "a", EndpointStatus5xx)
	route(t, p, "b", EndpointConnectFailed)
	b, err := p.Route(context.Background(), Request{ID: "c", Model: "m", Tokens: []uint32{1}})
	if err != nil || len(b.Candidates) != 1 || b.Candidates[0].Endpoint.HostPort != "h2:1" {
		t.Fatalf("with h1:1 open: %v %+v", err, b)
	}
	b.Report(0, EndpointStatus5xx)
	b.Done(context.Background())
	route(t, p, "d", EndpointStatus5xx) // h2:1 open too
	if _, err := p.Route(context.Background(), Request{ID: "e", Model: "m", Tokens: []uint32{1}}); !errors.Is(err, ErrBreakersOpen) || !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("every breaker open: %v, want ErrBreakersOpen", err)
	}
	if n := p.Metrics().Count("decisions", OutcomeBreakerOpen, ""); n != 1 {
		t.Errorf("breaker_open decisions %d, want 1", n)
	}
	clk.Advance(time.Minute)
	probe, err := p.Route(context.Background(), Request{ID: "f", Model: "m", Tokens: []uint32{1}})
	if err != nil || probe.Candidates[0].Endpoint.HostPort != "h1:1" {
		t.Fatalf("after the cool-down: %v %+v", err, probe)
	}
	second, err := p.Route(context.Background(), Request{ID: "g", Model: "m", Tokens: []uint32{1}})
	if err != nil || second.Candidates[0].Endpoint.HostPort != "h2:1" {
		t.Fatalf("h1:1's probe slot is taken: want h2:1's, got %v %+v", err, second)
	}
	second.Done(context.Background()) // no outcome: its probe slot comes back
	probe.Report(0, EndpointOK)
	probe.Done(context.Background())
	info := g.RankBreaker(api.RankInfo{ServingEndpoint: "http://h1:1"})
	if info == nil || info.State != "closed" {
		t.Fatalf("h1:1 after a successful probe: %+v", info)
	}
	if info := g.RankBreaker(api.RankInfo{ServingEndpoint: "h2:1"}); info == nil || info.State != "half_open" || info.ProbesOut != 0 {
		t.Fatalf("h2:1 after a probe released without an outcome: %+v", info)
	}
	var sb strings.Builder
	if err := g.WriteMetrics(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kvrouter_breaker_state{endpoint="h1:1"} 0`, `kvrouter_breaker_state{endpoint="h2:1"} 2`,
		`kvrouter_breaker_transitions_total{to="open"} 2`, `kvrouter_endpoint_results_total{result="status_5xx"} 3`} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, sb.String())
		}
	}
}

// Rate limits: a key over its prompt-token rate is refused with the wait
// until its bucket holds the request, taking nothing; a named key has its
// own limit; the request-per-second bucket is untouched by a refusal.
func TestRouteRateLimits(t *testing.T) {
	clk := frontendtest.NewClock()
	g := newGuard(t, clk, GuardConfig{Limits: Limits{Default: Limit{PromptTokensPerSecond: 10, PromptTokenBurst: 10, RequestsPerSecond: 1, RequestBurst: 2},
		Keys: map[string]Limit{"vip": {}}}})
	p := New(&fakeBackend{answer: threeWorkers()}, Config{Guard: g})
	do := func(id, key string, n int) error {
		b, err := p.Route(context.Background(), Request{ID: id, Model: "m", Tokens: make([]uint32, n), RateKey: key})
		if err == nil {
			b.Done(context.Background())
		}
		return err
	}
	if err := do("1", "t", 8); err != nil {
		t.Fatal(err)
	}
	err := do("2", "t", 8)
	var rl *RateLimitError
	if !errors.As(err, &rl) || rl.Kind != "prompt_tokens" || rl.Wait != 600*time.Millisecond || RetryAfterSeconds(rl.RetryAfter()) != 1 {
		t.Fatalf("8 tokens with 2 left at 10/s: %v", err)
	}
	if err := do("3", "vip", 1000); err != nil {
		t.Fatalf("a key named without limits: %v", err)
	}
	clk.Advance(600 * time.Millisecond)
	if err := do("4", "t", 8); err != nil {
		t.Fatalf("after the wait: %v (a refusal must not have taken a request token)", err)
	}
	if err := do("5", "", 1); err != nil { // the tenant's key: a bucket of its own
		t.Fatalf("the default tenant's first request: %v", err)
	}
}

// LoadLimits reads the file's shape and refuses unknown fields and
// negative rates.
func TestLoadLimits(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "l.json")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	l, err := LoadLimits(write(`{"default":{"requests_per_second":5},"keys":{"a":{"prompt_tokens_per_second":100,"prompt_token_burst":400}}}`))
	if err != nil || l.Default.RequestsPerSecond != 5 || l.Keys["a"].PromptTokenBurst != 400 {
		t.Fatalf("%+v %v", l, err)
	}
	for _, bad := range []string{`{"default":{"rps":5}}`, `{"keys":{"a":{"requests_per_second":-1}}}`, `[1]`} {
		if _, err := LoadLimits(write(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
