package requestpath

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// HealthConfig turns active health checks of the serving endpoints on:
// every Interval each one is sent GET Path (vLLM and SGLang answer 200 on
// /health while they serve); Thresholds.Failures checks failed in a row
// (an error, a timeout, a status outside 2xx) take it out of the
// candidates and trip its circuit breaker open, Thresholds.Successes
// passed in a row bring it back, its breaker half-open so probes go
// first. Zero values take the defaults.
type HealthConfig struct {
	Path       string        // default "/health"
	Interval   time.Duration // default 5 s
	Timeout    time.Duration // one check's deadline, default 2 s
	Thresholds guard.HealthConfig
	// Parallel bounds the checks in flight at once (default 16).
	Parallel int
	// Client sends the checks (default: a client of its own).
	Client *http.Client
}

// Health check defaults.
const (
	DefaultHealthPath     = "/health"
	DefaultHealthInterval = 5 * time.Second
	DefaultHealthTimeout  = 2 * time.Second
)

func (c HealthConfig) withDefaults() HealthConfig {
	if c.Path == "" {
		c.Path = DefaultHealthPath
	}
	if c.Interval <= 0 {
		c.Interval = DefaultHealthInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultHealthTimeout
	}
	if c.Parallel <= 0 {
		c.Parallel = 16
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	c.Thresholds = c.Thresholds.WithDefaults()
	return c
}

// healthState is the endpoints' health; the Guard's lock covers it.
type healthState struct {
	cfg       HealthConfig
	endpoints map[string]*endpointHealth // by host:port
	checks    map[bool]int64             // by passed
	turned    map[bool]int64             // changes, by healthy after
}

type endpointHealth struct {
	h       guard.Health
	tripped bool // its breaker was opened by the checks
}

func newHealthState(cfg *HealthConfig) *healthState {
	if cfg == nil {
		return nil
	}
	return &healthState{cfg: cfg.withDefaults(), endpoints: map[string]*endpointHealth{}, checks: map[bool]int64{}, turned: map[bool]int64{}}
}

// Healthy reports whether hostPort may get requests: true unless its
// health checks failed (and true with checks off or before the first).
func (g *Guard) Healthy(hostPort string) bool {
	if g == nil || g.health == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.health.endpoints[hostPort]
	return !ok || e.h.Healthy()
}

// CheckHealth checks every endpoint once, at most Parallel at a time,
// and returns when all are done (RunHealth calls it every Interval; tests
// call it directly). Endpoints not listed any more are forgotten.
func (g *Guard) CheckHealth(ctx context.Context, endpoints []serving.Endpoint) {
	if g == nil || g.health == nil {
		return
	}
	hs := g.health
	seen := make(map[string]bool, len(endpoints))
	sem := make(chan struct{}, hs.cfg.Parallel)
	var wg sync.WaitGroup
	for _, ep := range endpoints {
		if seen[ep.HostPort] {
			continue
		}
		seen[ep.HostPort] = true
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			g.recordHealth(ep.HostPort, hs.check(ctx, ep))
		}()
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for hp := range hs.endpoints {
		if !seen[hp] {
			delete(hs.endpoints, hp)
		}
	}
}

// check is one GET of ep's health path: "" when it answered 2xx in time,
// else why not.
func (hs *healthState) check(ctx context.Context, ep serving.Endpoint) string {
	ctx, cancel := context.WithTimeout(ctx, hs.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.BaseURL()+hs.cfg.Path, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := hs.cfg.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Sprintf("no answer within %v", hs.cfg.Timeout)
		}
		return "unreachable"
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4096) // let the connection be reused
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	return ""
}

// recordHealth counts one check of hostPort (why "" : passed). Turning
// unhealthy trips its breaker open; turning healthy again ends the
// cool-down of a breaker the checks opened, so probes go through.
func (g *Guard) recordHealth(hostPort, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	hs := g.health
	hs.checks[why == ""]++
	e, ok := hs.endpoints[hostPort]
	if !ok {
		if len(hs.endpoints) >= g.cfg.MaxEndpoints {
			g.counts.untracked++
			return
		}
		e = &endpointHealth{h: guard.NewHealth(hs.cfg.Thresholds)}
		hs.endpoints[hostPort] = e
	}
	if !e.h.Record(why) {
		return
	}
	hs.turned[e.h.Healthy()]++
	now := g.cfg.Now()
	b := g.breaker(hostPort)
	switch {
	case b == nil:
	case !e.h.Healthy():
		if b.Trip(now) {
			g.counts.transition(guard.Open)
			e.tripped = true
		}
	case e.tripped:
		b.EndCoolDown(now)
		e.tripped = false
	}
}

// RunHealth checks the endpoints list gives every Interval until ctx
// ends (nothing with health checks off).
func (g *Guard) RunHealth(ctx context.Context, list func(context.Context) []serving.Endpoint) {
	if g == nil || g.health == nil {
		return
	}
	t := time.NewTicker(g.health.cfg.Interval)
	defer t.Stop()
	for {
		g.CheckHealth(ctx, list(ctx))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RankHealth is the health of rank's serving endpoint for GET /workers
// (httpapi.Options.RankHealth): nil with checks off, before its first
// check, or without a serving endpoint.
func (g *Guard) RankHealth(rank api.RankInfo) *api.HealthInfo {
	if g == nil || g.health == nil || rank.ServingEndpoint == "" {
		return nil
	}
	ep, err := serving.Parse(rank.ServingEndpoint)
	if err != nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.health.endpoints[ep.HostPort]
	if !ok {
		return nil
	}
	in := e.h.Info()
	return &api.HealthInfo{Healthy: in.Healthy, ConsecutiveFailures: in.Fails, ConsecutivePasses: in.Passes,
		Checks: in.Checks, Failed: in.Failed, LastError: in.LastError}
}

// writeHealthMetrics writes the health checks' metrics (called with the
// counts copied).
func writeHealthMetrics(w io.Writer, checks, turned map[bool]int64, unhealthy int) {
	fmt.Fprintf(w, "# HELP kvrouter_health_checks_total Active health checks of serving endpoints, by result.\n# TYPE kvrouter_health_checks_total counter\n")
	fmt.Fprintf(w, "kvrouter_health_checks_total{result=\"passed\"} %d\nkvrouter_health_checks_total{result=\"failed\"} %d\n", checks[true], checks[false])
	fmt.Fprintf(w, "# HELP kvrouter_health_transitions_total Serving endpoints turning healthy or unhealthy.\n# TYPE kvrouter_health_transitions_total counter\n")
	fmt.Fprintf(w, "kvrouter_health_transitions_total{to=\"healthy\"} %d\nkvrouter_health_transitions_total{to=\"unhealthy\"} %d\n", turned[true], turned[false])
	fmt.Fprintf(w, "# HELP kvrouter_health_unhealthy_endpoints Serving endpoints out of the candidates for failing their health checks.\n# TYPE kvrouter_health_unhealthy_endpoints gauge\nkvrouter_health_unhealthy_endpoints %d\n", unhealthy)
}
