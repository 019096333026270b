package requestpath

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
)

// EndpointResult is what a serving endpoint did with a request sent to
// it, as its breaker counts it (and the metrics' result label).
type EndpointResult string

// Endpoint results. EndpointOK is a success for the breaker (an answer
// below 500, whatever its status); the others are failures.
const (
	EndpointOK            EndpointResult = "ok"
	EndpointConnectFailed EndpointResult = "connect_failed" // refused, connect timeout, no response headers
	EndpointStatus5xx     EndpointResult = "status_5xx"     // the engine answered 500–599
	EndpointReset         EndpointResult = "reset"          // the answer broke off before its first byte
)

// guardCounts are the Guard's counters; its lock covers them.
type guardCounts struct {
	transitions map[guard.BreakerState]int64 // by the state entered
	// sharedTrips and remoteTrips count the breaker trips pushed to the
	// other router hosts and those received from them.
	sharedTrips, remoteTrips int64
	results                  map[EndpointResult]int64
	refused                  int64            // requests a breaker did not let through
	untracked                int64            // endpoints past MaxEndpoints
	limited                  map[string]int64 // by bucket kind
	limitOverflow            int64
}

func (c *guardCounts) transition(to guard.BreakerState) {
	if c.transitions == nil {
		c.transitions = map[guard.BreakerState]int64{}
	}
	c.transitions[to]++
}

func (c *guardCounts) result(r EndpointResult) {
	if c.results == nil {
		c.results = map[EndpointResult]int64{}
	}
	c.results[r]++
}

// BreakerTransitions is the number of times a breaker entered state to
// (tests, the bench).
func (g *Guard) BreakerTransitions(to guard.BreakerState) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts.transitions[to]
}

// WriteMetrics writes the Guard's metrics in the Prometheus text format
// (once per process, whichever front ends share it):
//
//	kvrouter_breaker_state{endpoint}                 0 closed, 1 open, 2 half-open (Gauge)
//	kvrouter_breaker_transitions_total{to}           state changes, by the state entered
//	kvrouter_breaker_refused_total                   requests a breaker did not let through
//	kvrouter_breaker_untracked_endpoints_total       endpoints past the breaker cap
//	kvrouter_endpoint_results_total{result}          what endpoints did with requests (ok, connect_failed, status_5xx, reset)
//	kvrouter_rate_limited_total{kind}                requests refused by a rate limit (requests, prompt_tokens)
//	kvrouter_rate_limit_overflow_total               new keys past the key cap, sharing the overflow buckets
//	kvrouter_flow_requests_total{band,outcome}       flow control: queued, dispatched, expired, evicted, gone, full, sheddable
//	kvrouter_flow_queue_requests / _bytes            flow control: requests and body bytes waiting now (Gauges)
//	kvrouter_health_checks_total{result}             active health checks: passed, failed
//	kvrouter_health_transitions_total{to}            endpoints turning healthy, unhealthy
//	kvrouter_health_unhealthy_endpoints              endpoints out of the candidates now (Gauge)
func (g *Guard) WriteMetrics(w io.Writer) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	now := g.cfg.Now()
	states := make(map[string]guard.BreakerState, len(g.breakers))
	for ep, b := range g.breakers {
		states[ep] = b.State(now)
	}
	c := g.counts
	c.transitions, c.results, c.limited = maps.Clone(c.transitions), maps.Clone(c.results), maps.Clone(c.limited)
	var flow map[[2]string]int64
	var queued int
	var queuedBytes int64
	if g.flowing != nil {
		flow, queued, queuedBytes = maps.Clone(g.flowing.outcomes), g.flowing.waiting(), g.flowing.q.Bytes()
	}
	var checks, turned map[bool]int64
	unhealthy := 0
	if g.health != nil {
		checks, turned = maps.Clone(g.health.checks), maps.Clone(g.health.turned)
		for _, e := range g.health.endpoints {
			if !e.h.Healthy() {
				unhealthy++
			}
		}
	}
	g.mu.Unlock()
	var sb strings.Builder
	sb.WriteString("# HELP kvrouter_breaker_state Circuit breaker state per serving endpoint (0 closed, 1 open, 2 half-open).\n# TYPE kvrouter_breaker_state gauge\n")
	for _, ep := range slices.Sorted(maps.Keys(states)) {
		fmt.Fprintf(&sb, "kvrouter_breaker_state{endpoint=%q} %d\n", ep, states[ep])
	}
	sb.WriteString("# HELP kvrouter_breaker_transitions_total Circuit breaker state changes, by the state entered.\n# TYPE kvrouter_breaker_transitions_total counter\n")
	for _, s := range []guard.BreakerState{guard.Closed, guard.Open, guard.HalfOpen} {
		fmt.Fprintf(&sb, "kvrouter_breaker_transitions_total{to=%q} %d\n", s, c.transitions[s])
	}
	fmt.Fprintf(&sb, "# HELP kvrouter_breaker_shared_trips_total Circuit breakers that opened here and were pushed to the other router hosts (sent), or opened here because another host's opened (received).\n# TYPE kvrouter_breaker_shared_trips_total counter\nkvrouter_breaker_shared_trips_total{direction=\"sent\"} %d\nkvrouter_breaker_shared_trips_total{direction=\"received\"} %d\n", c.sharedTrips, c.remoteTrips)
	fmt.Fprintf(&sb, "# HELP kvrouter_breaker_refused_total Requests a circuit breaker did not let through to its endpoint.\n# TYPE kvrouter_breaker_refused_total counter\nkvrouter_breaker_refused_total %d\n", c.refused)
	fmt.Fprintf(&sb, "# HELP kvrouter_breaker_untracked_endpoints_total Endpoints seen past the breaker cap (unguarded).\n# TYPE kvrouter_breaker_untracked_endpoints_total counter\nkvrouter_breaker_untracked_endpoints_total %d\n", c.untracked)
	sb.WriteString("# HELP kvrouter_endpoint_results_total What serving endpoints did with the requests sent to them, as the breakers count it.\n# TYPE kvrouter_endpoint_results_total counter\n")
	for _, r := range []EndpointResult{EndpointOK, EndpointConnectFailed, EndpointStatus5xx, EndpointReset} {
		fmt.Fprintf(&sb, "kvrouter_endpoint_results_total{result=%q} %d\n", r, c.results[r])
	}
	sb.WriteString("# HELP kvrouter_rate_limited_total Requests refused by a rate limit, by the bucket that refused.\n# TYPE kvrouter_rate_limited_total counter\n")
	for _, k := range []string{"requests", "prompt_tokens"} {
		fmt.Fprintf(&sb, "kvrouter_rate_limited_total{kind=%q} %d\n", k, c.limited[k])
	}
	fmt.Fprintf(&sb, "# HELP kvrouter_rate_limit_overflow_total New rate-limit keys past the key cap, sharing one pair of buckets.\n# TYPE kvrouter_rate_limit_overflow_total counter\nkvrouter_rate_limit_overflow_total %d\n", c.limitOverflow)
	if g.flowing != nil {
		writeFlowMetrics(&sb, flow, queued, queuedBytes)
	}
	if g.health != nil {
		writeHealthMetrics(&sb, checks, turned, unhealthy)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func writeFlowMetrics(sb *strings.Builder, outcomes map[[2]string]int64, queued int, bytes int64) {
	sb.WriteString("# HELP kvrouter_flow_requests_total Flow control: requests by priority band and outcome (queued, dispatched, expired, evicted, gone, full, sheddable).\n# TYPE kvrouter_flow_requests_total counter\n")
	if len(outcomes) == 0 {
		outcomes = map[[2]string]int64{{"0", FlowQueued}: 0}
	}
	for _, k := range slices.SortedFunc(maps.Keys(outcomes), func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) }) {
		fmt.Fprintf(sb, "kvrouter_flow_requests_total{band=%q,outcome=%q} %d\n", k[0], k[1], outcomes[k])
	}
	fmt.Fprintf(sb, "# HELP kvrouter_flow_queue_requests Flow control: requests waiting for room now.\n# TYPE kvrouter_flow_queue_requests gauge\nkvrouter_flow_queue_requests %d\n", queued)
	fmt.Fprintf(sb, "# HELP kvrouter_flow_queue_bytes Flow control: request body bytes waiting for room now.\n# TYPE kvrouter_flow_queue_bytes gauge\nkvrouter_flow_queue_bytes %d\n", bytes)
}
