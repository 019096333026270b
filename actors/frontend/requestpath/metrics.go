package requestpath

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Outcomes of Route (the decisions metric's labels).
const (
	OutcomeRouted = "routed"
	OutcomeShed   = "shed" // ErrOverloaded: booked load, bookings in flight
	// OutcomeSaturated: ErrOverloaded, every candidate's engine saturated
	// (engine signals).
	OutcomeSaturated = "saturated"
	// OutcomeReserved: ErrOverloaded (ErrNoRoom: flow control queues it),
	// routing the request would leave fewer workers with room than
	// FlowConfig.ReserveWorkers keeps for the higher bands.
	OutcomeReserved = "reserved"
	// OutcomeOverCapacity: ErrOverloaded, the route calls in flight at
	// Config.Admission's cap.
	OutcomeOverCapacity = "over_capacity"
	OutcomeNoEndpoint   = "no_endpoint" // ErrNoEndpoint
	// OutcomeBreakerOpen: ErrBreakersOpen, every candidate's circuit
	// breaker open.
	OutcomeBreakerOpen = "breaker_open"
	// OutcomeRateLimited: ErrRateLimited, the request's key over its rate
	// limit.
	OutcomeRateLimited = "rate_limited"
	OutcomeError       = "error" // the router refused (bad input, unknown model, timeout)
)

// Results of a bookkeeping call (the bookkeeping metric's labels).
const (
	ResultOK              = "ok"
	ResultError           = "error"            // the router refused it (logged)
	ResultIgnored         = "ignored"          // out of turn: after Done, a second Served
	ResultUnknownEndpoint = "unknown_endpoint" // ServedEndpoint named no candidate
)

// Metrics counts what the request path did. WriteMetrics writes them in
// the Prometheus text format:
//
//	kvrouter_request_path_decisions_total{front,outcome}
//	kvrouter_request_path_skipped_workers_total{front,reason}      ranks left out of candidate lists
//	kvrouter_request_path_routed_by_load_total{front,reason}       requests without token ids
//	kvrouter_request_path_bookkeeping_total{front,action,result}
//	kvrouter_request_path_hit_reports_total{front,result}          answers read for the engine's cached tokens
//	kvrouter_request_path_retries_total{front,reason}              retries to the next candidate, by what the last attempt got
//	kvrouter_request_path_retries_refused_total{front,reason}      retries not made: budget (spent), attempts (cap reached)
//	kvrouter_request_path_in_flight{front}                         bookings not yet done (Gauge)
//
// Front names the front end (proxy, picker), set before use.
type Metrics struct {
	Front  string
	mu     sync.Mutex
	counts map[[3]string]int64 // (metric, label, label) → count
}

func (m *Metrics) add(metric, a, b string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[[3]string]int64{}
	}
	m.counts[[3]string{metric, a, b}] += n
}

func (m *Metrics) decision(outcome string) { m.add("decisions", outcome, "", 1) }
func (m *Metrics) byLoad(reason string)    { m.add("routed_by_load", reason, "", 1) }
func (m *Metrics) bookkeeping(k ActionKind, result string) {
	m.add("bookkeeping", k.String(), result, 1)
}
func (m *Metrics) skip(s Skipped) {
	for reason, n := range s {
		m.add("skipped_workers", reason, "", int64(n))
	}
}

// Count returns one counter's value (tests, the demo): metric is
// "decisions", "skipped_workers", "routed_by_load" or "bookkeeping"; b is
// "" but for bookkeeping's result.
func (m *Metrics) Count(metric, a, b string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[[3]string{metric, a, b}]
}

// metricHelp names each counter's labels and help.
var metricHelp = map[string][3]string{
	"decisions":       {"outcome", "", "Requests the request path routed, by outcome (routed, shed, saturated, reserved (held back for higher priority bands), over_capacity, no_endpoint, breaker_open, rate_limited, error)."},
	"retries":         {"reason", "", "Retries of a request on the next candidate before any byte reached the client, by what the failed attempt got."},
	"retries_refused": {"reason", "", "Retries a request wanted and did not get: budget (the fleet-wide retry budget is spent), attempts (the per-request cap)."},
	"skipped_workers": {"reason", "", "Ranks left out of a request's candidates, by reason."},
	"routed_by_load":  {"reason", "", "Requests routed by load alone (no token ids), by why there were none."},
	"bookkeeping":     {"action", "result", "Bookkeeping calls from responses (rebook, prefill_done, move_prefill, free), by result."},
	"hit_reports":     {"result", "", "Answers read for the engine's reported cached tokens, by result: reported (to the prediction check), no_usage, moved (served by another rank than predicted), by_load (nothing predicted), split (a split request: the decode engine's report counts the transferred prompt)."},
}

// WriteMetrics writes the counters in the Prometheus text format (for
// telemetry.Metrics.Handler's extra writers).
func (m *Metrics) WriteMetrics(w io.Writer, inFlight int) error {
	m.mu.Lock()
	keys := make([][3]string, 0, len(m.counts))
	for k := range m.counts {
		keys = append(keys, k)
	}
	counts := make(map[[3]string]int64, len(keys))
	for _, k := range keys {
		counts[k] = m.counts[k]
	}
	m.mu.Unlock()
	slices.SortFunc(keys, func(a, b [3]string) int {
		return strings.Compare(strings.Join(a[:], "\x00"), strings.Join(b[:], "\x00"))
	})
	var sb strings.Builder
	for _, name := range []string{"bookkeeping", "decisions", "hit_reports", "retries", "retries_refused", "routed_by_load", "skipped_workers"} {
		h := metricHelp[name]
		full := "kvrouter_request_path_" + name + "_total"
		fmt.Fprintf(&sb, "# HELP %s %s\n# TYPE %s counter\n", full, h[2], full)
		for _, k := range keys {
			if k[0] != name {
				continue
			}
			fmt.Fprintf(&sb, "%s{front=%q,%s=%q", full, m.Front, h[0], k[1])
			if h[1] != "" {
				fmt.Fprintf(&sb, ",%s=%q", h[1], k[2])
			}
			fmt.Fprintf(&sb, "} %d\n", counts[k])
		}
	}
	fmt.Fprintf(&sb, "# HELP kvrouter_request_path_in_flight Bookings whose response has not ended.\n# TYPE kvrouter_request_path_in_flight gauge\nkvrouter_request_path_in_flight{front=%q} %d\n", m.Front, inFlight)
	_, err := io.WriteString(w, sb.String())
	return err
}

// WriteMetrics writes the path's metrics (Metrics.WriteMetrics with its
// bookings in flight).
func (p *Path) WriteMetrics(w io.Writer) error { return p.metrics.WriteMetrics(w, p.InFlight()) }
