// Package admission bounds the route requests the front ends work on at
// once: the HTTP API's POST /route and the request path's routes (the
// OpenAI proxy, the endpoint picker) share one Gate in kvrouter serve.
//
// Past saturation an unbounded front end lets every arriving request in:
// each then waits behind all the others for the cores, the route path's
// queues outgrow its deadline and every request is answered late — the
// router works flat out for no answer in time. A Gate admits at most Max
// requests at once and refuses the rest at once: the over-capacity answer
// costs a body's decoding, not a lookup and a decision. The HTTP API asks the gate
// once the body is read and decoded, not before: a request whose client
// is slow to send its body would otherwise hold a place while the router
// does nothing for it.
//
// kvrouter serve leaves the cap off by default (--max-inflight-routes 0).
// In the pinned runs (bench/README.md, "Pinned load") no cap tried helped
// on one core: 100 a core, asked before the body, left half the core idle
// and refused most of what it could serve; 512, asked after the body,
// served no more than no cap with 512 connections offered, and with 4,096
// connections the refusals (each a body read and decoded) took the core
// from the admitted requests, which then all expired. The route path's
// own shedding (actors/expiry) is what holds the router up; the cap is
// for an operator who knows the router's concurrency.
//
// # The edge
//
// The Gate is asked after the body is decoded, so each refusal still
// costs the decode. The Edge (edge.go, the pure EdgeState; edgeshell.go,
// its lock, counters, trace events, log lines and HTTP shell) is asked
// before the body is read, from facts the headers give: the requests in
// flight on the host's edge and on the endpoint, the declared
// Content-Length against a budget of body bytes in flight, and whether the
// Gate is full (EdgeConfig.Overloaded). Its refusal costs a header parse
// and a small write. The HTTP API puts POST /route and /select_and_reserve
// behind it (the endpoint table's edged rows), kvrouter serve the proxy's
// POSTs (cmd/kvrouter/edgeflags.go); the picker reads a gRPC stream, with
// no request headers to decide on, and keeps the Gate only.
//
// It never refuses what an idle router would serve: a request arriving
// with nothing in flight is always taken, whatever the caps, and the only
// refusal with nothing in flight is a Content-Length over the endpoint's
// body cap, answered 413 body_too_large as its body reader would answer
// it after reading — here unread and without a buffer. A chunked body (no
// Content-Length) is taken on the same terms and charged its endpoint's
// whole body cap, the most its reader lets it hold, so the bytes budget
// stays a bound on memory; clients that send Content-Length (every common
// HTTP client does for a JSON body) are charged what they declared. The
// slot is freed when the handler returns, however it returns: an answer,
// an error, a client that went away (the Backend returns on the context),
// a panic the handler recovers.
//
// The defaults (kvrouter serve --edge-max-inflight,
// --edge-max-inflight-bytes) come from measured cost: a core answers a
// /route in ~85 µs of CPU (bench/README.md, "Judged: the route targets"),
// so in the route path's 50 ms deadline (serve --timeout) it finishes
// ~600; DefaultEdgeInFlightPerCore, 512 a core × GOMAXPROCS, is about what
// it can answer in time, and a request past it would only wait to expire.
// The bytes budget, 256 MiB, bounds what a burst of bodies holds: 20 of
// the largest /route bodies (12 MiB at the 1 M-token cap), 100,000 typical
// ones (2.4 KB); it is never below one body cap in practice, and were it
// set below, the idle rule still takes the one body. Why not the obvious
// alternative, a cap on connections (net/http has none, and
// netutil.LimitListener makes the excess wait in the accept queue, seen
// by a client as a slow answer, not a fast refusal): the edge answers
// each request it cannot serve at once, which is what a client's retry
// and a load balancer's outlier detection act on.
//
// The HTTP API answers a refused /route 503 with Retry-After (reason
// overloaded): the router itself is over capacity, which is what 503
// says (RFC 9110 §15.6.4), as its other over-capacity answers (a full
// booking table, a deadline passed) already do; 429 says that a client
// sent too many requests, which no single client did. The request path
// answers it as its other sheds (requestpath.ErrOverloaded): the clients
// of a proxy or picker see one answer for a request shed.
package admission

import (
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"
)

// logEvery spaces the log lines of refused requests.
const logEvery = 10 * time.Second

// Gate admits at most a fixed number of requests at once. A nil Gate, or
// one of Max 0, admits everything. Safe for concurrent use.
type Gate struct {
	max     int64
	n       atomic.Int64
	refused atomic.Uint64
	logged  atomic.Int64 // refused count at the last log line
	lastLog atomic.Int64 // its time, Unix nanoseconds
	logger  *slog.Logger // nil: silent
}

// New returns a Gate admitting max requests at once (0: every request);
// refusals are logged to logger at most every logEvery.
func New(max int, logger *slog.Logger) *Gate {
	return &Gate{max: int64(max), logger: logger}
}

// Over reports whether a request arriving while n are in flight is over
// the cap max (0: none).
func Over(n, max int64) bool { return max > 0 && n >= max }

// Enter admits a request (true: the caller must Leave when done) or
// refuses it, counted and logged (false).
func (g *Gate) Enter() bool {
	if g == nil {
		return true
	}
	if n := g.n.Add(1); Over(n-1, g.max) {
		g.n.Add(-1)
		g.refuse()
		return false
	}
	return true
}

// Leave ends an admitted request.
func (g *Gate) Leave() {
	if g != nil {
		g.n.Add(-1)
	}
}

// refuse counts a refusal and logs the refusals since the last line when
// logEvery has passed.
func (g *Gate) refuse() {
	total := g.refused.Add(1)
	if g.logger == nil {
		return
	}
	now, last := time.Now().UnixNano(), g.lastLog.Load()
	if !logDue(last, now) || !g.lastLog.CompareAndSwap(last, now) {
		return
	}
	since := total - uint64(g.logged.Swap(int64(total)))
	g.logger.Warn("route admission: over capacity, answering requests overloaded", "max_in_flight", g.max, "refused", since)
}

// logDue reports whether a refusal at now (Unix nanoseconds) gets a log
// line when the last one was at last (0: never).
func logDue(last, now int64) bool { return last == 0 || now-last >= int64(logEvery) }

// Full reports whether the gate would refuse a request now (the edge's
// overload state: EdgeConfig.Overloaded).
func (g *Gate) Full() bool { return g != nil && Over(g.n.Load(), g.max) }

// Max is the cap (0: none).
func (g *Gate) Max() int {
	if g == nil {
		return 0
	}
	return int(g.max)
}

// InFlight is the requests admitted and not yet left.
func (g *Gate) InFlight() int {
	if g == nil {
		return 0
	}
	return int(g.n.Load())
}

// Refused is the requests refused so far.
func (g *Gate) Refused() uint64 {
	if g == nil {
		return 0
	}
	return g.refused.Load()
}

// WriteMetrics writes the gate's figures in the Prometheus text format
// (for telemetry.Metrics.Handler's extra writers):
//
//	kvrouter_route_admission_refused_total   requests refused over the cap
//	kvrouter_route_admission_in_flight       requests admitted, not yet done (gauge)
//	kvrouter_route_admission_max_in_flight   the cap, 0 for none (gauge)
func (g *Gate) WriteMetrics(w io.Writer) error {
	_, err := fmt.Fprintf(w, `# HELP kvrouter_route_admission_refused_total Route requests refused at once because the front ends had the most in flight they admit.
# TYPE kvrouter_route_admission_refused_total counter
kvrouter_route_admission_refused_total %d
# HELP kvrouter_route_admission_in_flight Route requests admitted and not yet answered.
# TYPE kvrouter_route_admission_in_flight gauge
kvrouter_route_admission_in_flight %d
# HELP kvrouter_route_admission_max_in_flight Route requests admitted at once at most (0: no cap).
# TYPE kvrouter_route_admission_max_in_flight gauge
kvrouter_route_admission_max_in_flight %d
`, g.Refused(), g.InFlight(), g.Max())
	return err
}
