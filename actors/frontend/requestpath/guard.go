package requestpath

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// GuardConfig configures a Guard. Zero values take the defaults of
// package guard.
type GuardConfig struct {
	// Breaker configures every serving endpoint's circuit breaker;
	// BreakerOff turns breakers off (every endpoint admitted).
	Breaker    guard.BreakerConfig
	BreakerOff bool
	// MaxEndpoints bounds the endpoints with a breaker (default 4096);
	// past it a new endpoint goes unguarded, counted.
	MaxEndpoints int
	// RetryRatio, RetryMin and RetryWindow are the fleet-wide retry
	// budget (guard.NewBudget); Backoff spaces a request's retries.
	RetryRatio  float64
	RetryMin    int
	RetryWindow time.Duration
	Backoff     guard.Backoff
	// Limits are the rate limits per key (tenant or fairness id).
	Limits Limits
	// Flow, when set, turns flow control on (flow.go).
	Flow *FlowConfig
	// Health, when set, turns active health checks on (health.go).
	Health *HealthConfig

	// Now, Rand and Sleep are the clock, the jitter's uniform draw in
	// [0, 1) and the backoff's wait (tests inject them; defaults:
	// time.Now, math/rand/v2, a timer that ends with ctx).
	Now   func() time.Time
	Rand  func() float64
	Sleep func(ctx context.Context, d time.Duration) error
}

// Guard is the request path's protection state, shared by every front
// end of the process (kvrouter serve hands one to the proxy's and the
// picker's Path): a circuit breaker per serving endpoint, the retry
// budget and backoff, the rate limits. The decisions are package guard's
// pure values; Guard adds the lock, the clock and the counts. Safe for
// concurrent use; a nil *Guard guards nothing.
type Guard struct {
	cfg     GuardConfig
	backoff guard.Backoff

	mu       sync.Mutex
	breakers map[string]*guard.Breaker // by serving endpoint (host:port)
	budget   guard.Budget
	limiter  limiter
	counts   guardCounts
	flowing  *flowState            // nil: flow control off
	health   *healthState          // nil: health checks off
	push     func(hostPort string) // ShareTrips; nil: not shared
}

// NewGuard returns a Guard; it checks the configuration.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if err := cfg.Breaker.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Limits.validate(); err != nil {
		return nil, err
	}
	if cfg.MaxEndpoints <= 0 {
		cfg.MaxEndpoints = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	cfg.Breaker = cfg.Breaker.WithDefaults()
	return &Guard{cfg: cfg, backoff: cfg.Backoff.WithDefaults(), breakers: map[string]*guard.Breaker{},
		budget: guard.NewBudget(cfg.RetryRatio, cfg.RetryMin, cfg.RetryWindow), limiter: newLimiter(cfg.Limits),
		flowing: newFlowState(cfg.Flow), health: newHealthState(cfg.Health)}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// breaker is hostPort's breaker, made on first use (nil: breakers off,
// or the endpoint cap reached). Called with g.mu held.
func (g *Guard) breaker(hostPort string) *guard.Breaker {
	if g.cfg.BreakerOff {
		return nil
	}
	if b, ok := g.breakers[hostPort]; ok {
		return b
	}
	if len(g.breakers) >= g.cfg.MaxEndpoints {
		g.counts.untracked++
		return nil
	}
	b := guard.NewBreaker(g.cfg.Breaker)
	g.breakers[hostPort] = &b
	return &b
}

// Admits reports whether hostPort's breaker would let a request through
// now (open: no; half-open: while a probe slot is free).
func (g *Guard) Admits(hostPort string) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.breakers[hostPort]
	return !ok || b.Admits(g.cfg.Now())
}

// attempt takes a ticket from hostPort's breaker for a request about to
// be sent there.
func (g *Guard) attempt(hostPort string) (guard.Ticket, bool) {
	if g == nil {
		return guard.Ticket{}, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.breaker(hostPort)
	if b == nil {
		return guard.Ticket{}, true
	}
	t, ok, changed := b.Allow(g.cfg.Now())
	if changed {
		g.counts.transition(guard.HalfOpen)
	}
	if !ok {
		g.counts.refused++
	}
	return t, ok
}

// record gives a ticket back with what the endpoint did.
func (g *Guard) record(hostPort string, t guard.Ticket, r EndpointResult) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.counts.result(r)
	b, ok := g.breakers[hostPort]
	if !ok {
		g.mu.Unlock()
		return
	}
	now := g.cfg.Now()
	var push func(string)
	if b.Record(now, t, r == EndpointOK) {
		to := b.State(now)
		g.counts.transition(to)
		if to == guard.Open && g.push != nil {
			push = g.push
			g.counts.sharedTrips++
		}
	}
	g.mu.Unlock()
	if push != nil {
		push(hostPort)
	}
}

// release gives a ticket back without an outcome.
func (g *Guard) release(hostPort string, t guard.Ticket) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if b, ok := g.breakers[hostPort]; ok {
		b.Release(t)
	}
}

// BreakerInfo describes hostPort's breaker (ok false: none yet, i.e.
// closed with no outcome recorded).
func (g *Guard) BreakerInfo(hostPort string) (guard.Info, bool) {
	if g == nil {
		return guard.Info{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.breakers[hostPort]
	if !ok {
		return guard.Info{}, false
	}
	return b.Info(g.cfg.Now()), true
}

// RankBreaker is the breaker of rank's serving endpoint for GET /workers
// (httpapi.Options.RankBreaker): nil without a serving endpoint or with
// breakers off; closed with empty counts before its first answer.
func (g *Guard) RankBreaker(rank api.RankInfo) *api.BreakerInfo {
	if g == nil || g.cfg.BreakerOff || rank.ServingEndpoint == "" {
		return nil
	}
	ep, err := serving.Parse(rank.ServingEndpoint)
	if err != nil {
		return nil
	}
	in, _ := g.BreakerInfo(ep.HostPort)
	out := &api.BreakerInfo{State: in.State.String(), Consecutive: in.Consecutive, Good: in.Good, Bad: in.Bad,
		ProbesOut: in.ProbesOut, ProbesPassed: in.ProbesPassed}
	if !in.CoolDownEnds.IsZero() {
		out.HalfOpensAt = in.CoolDownEnds.UTC().Format(time.RFC3339)
	}
	return out
}

// ErrRetryBudget: the fleet-wide retry budget is spent.
var ErrRetryBudget = errors.New("retry budget spent")

// request counts one routed request for the retry budget.
func (g *Guard) request() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.budget.Request(g.cfg.Now())
}

// retry takes retry n (n ≥ 1) of a request from the budget and waits its
// backoff: ErrRetryBudget when spent, ctx's error when the client went
// away while waiting.
func (g *Guard) retry(ctx context.Context, n int) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	ok := g.budget.Retry(g.cfg.Now())
	u := g.cfg.Rand()
	g.mu.Unlock()
	if !ok {
		return ErrRetryBudget
	}
	return g.cfg.Sleep(ctx, g.backoff.Delay(n, u))
}
