package picker

import (
	"bufio"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is how the picker answered a request (a metrics label).
type Outcome uint8

// Outcomes.
const (
	OutcomeRouted      Outcome = iota // routed on the prompt's cache overlap and load
	OutcomeLoadOnly                   // routed by load only (Reason says why)
	OutcomeNoEndpoint                 // 503: no ready endpoint
	OutcomeSubset                     // 503: the subset hint left no eligible endpoint
	OutcomeOverloaded                 // 429: shed
	OutcomeInvalid                    // 400: not a request the picker can route
	OutcomeTooLarge                   // 413: body past the picker's bound
	OutcomeError                      // 500: the router failed
	OutcomeRateLimited                // 429 with Retry-After: the request's key is over its rate limit
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"routed", "load_only", "no_endpoint", "subset_unavailable", "overloaded", "invalid", "too_large", "error", "rate_limited"}

// String returns the outcome's label.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "invalid"
}

// bookEvent is a bookkeeping call (a metrics label).
type bookEvent uint8

const (
	bookServed      bookEvent = iota // served where first chosen
	bookServedMoved                  // served elsewhere (a retry): the booking moved
	bookFirstByte
	bookDone
	numBookEvents
)

var bookNames = [numBookEvents]string{"served", "served_moved", "first_byte", "done"}

// failure is an error the picker counted (a metrics label).
type failure uint8

const (
	failProtocol    failure = iota // the data plane broke the message order
	failSend                       // a response could not be sent (stream gone)
	failBookkeeping                // Core.Served / FirstByte / Done returned an error
	numFailures
)

var failureNames = [numFailures]string{"protocol", "send", "bookkeeping"}

// Decision latency buckets (seconds): request complete → answer sent.
var decisionBuckets = [...]float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3}

// counters are the picker's metrics: every label comes from a fixed set.
type counters struct {
	outcomes [numOutcomes]atomic.Uint64
	// loadOnly counts by reason; the labels come from this package's and
	// the tokenizer's fixed sets.
	loadOnlyMu sync.Mutex
	loadOnly   map[string]uint64
	bookings   [numBookEvents]atomic.Uint64
	failures   [numFailures]atomic.Uint64
	inFlight   atomic.Int64
	// decision: cumulative bucket counts, count and sum in nanoseconds.
	decision      [len(decisionBuckets)]atomic.Uint64
	decisionCount atomic.Uint64
	decisionNanos atomic.Uint64
}

func (c *counters) decided(o Outcome, reason string) {
	c.outcomes[o].Add(1)
	if o == OutcomeLoadOnly {
		c.loadOnlyMu.Lock()
		if c.loadOnly == nil {
			c.loadOnly = map[string]uint64{}
		}
		c.loadOnly[reason]++
		c.loadOnlyMu.Unlock()
	}
}

func (c *counters) observe(d time.Duration) {
	s := d.Seconds()
	for i, b := range decisionBuckets {
		if s <= b {
			c.decision[i].Add(1)
		}
	}
	c.decisionCount.Add(1)
	c.decisionNanos.Add(uint64(max(d, 0)))
}

// Outcomes returns how many requests ended with each outcome (for tests and
// the benchmark).
func (s *Server) Outcomes() map[Outcome]uint64 {
	out := map[Outcome]uint64{}
	for o := range numOutcomes {
		if n := s.metrics.outcomes[o].Load(); n > 0 {
			out[o] = n
		}
	}
	return out
}

// WriteMetrics writes the picker's metrics in the Prometheus text format:
//
//	kvrouter_epp_requests_total{outcome}     answers: routed, load_only, no_endpoint, subset_unavailable, overloaded, invalid, too_large, error
//	kvrouter_epp_load_only_total{reason}     why a request was routed by load only
//	kvrouter_epp_bookings_total{event}       served, served_moved (a retry), first_byte, done
//	kvrouter_epp_errors_total{reason}        protocol, send, bookkeeping
//	kvrouter_epp_streams_in_flight           ext_proc streams open
//	kvrouter_epp_decision_seconds            request complete → answer sent (histogram)
func (s *Server) WriteMetrics(w io.Writer) error {
	c := &s.metrics
	bw := bufio.NewWriter(w)
	family := func(name, kind, help string) {
		bw.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + kind + "\n")
	}
	sample := func(name, label, value string, n uint64) {
		bw.WriteString(name + "{" + label + `="` + value + `"} ` + strconv.FormatUint(n, 10) + "\n")
	}
	family("kvrouter_epp_requests_total", "counter", "Endpoint picker answers, by outcome.")
	for o := range numOutcomes {
		sample("kvrouter_epp_requests_total", "outcome", o.String(), c.outcomes[o].Load())
	}
	family("kvrouter_epp_load_only_total", "counter", "Requests the endpoint picker routed by load only, by reason.")
	c.loadOnlyMu.Lock()
	reasons := slices.Sorted(maps.Keys(c.loadOnly))
	for _, r := range reasons {
		sample("kvrouter_epp_load_only_total", "reason", r, c.loadOnly[r])
	}
	c.loadOnlyMu.Unlock()
	family("kvrouter_epp_bookings_total", "counter", "Bookkeeping the endpoint picker did from the responses, by event.")
	for e := range numBookEvents {
		sample("kvrouter_epp_bookings_total", "event", bookNames[e], c.bookings[e].Load())
	}
	family("kvrouter_epp_errors_total", "counter", "Endpoint picker errors, by reason.")
	for f := range numFailures {
		sample("kvrouter_epp_errors_total", "reason", failureNames[f], c.failures[f].Load())
	}
	family("kvrouter_epp_streams_in_flight", "gauge", "ext_proc streams open.")
	bw.WriteString("kvrouter_epp_streams_in_flight " + strconv.FormatInt(c.inFlight.Load(), 10) + "\n")
	family("kvrouter_epp_decision_seconds", "histogram", "Endpoint picker decision latency: request complete to answer sent.")
	for i, b := range decisionBuckets {
		sample("kvrouter_epp_decision_seconds_bucket", "le", strconv.FormatFloat(b, 'g', -1, 64), c.decision[i].Load())
	}
	n := c.decisionCount.Load()
	sample("kvrouter_epp_decision_seconds_bucket", "le", "+Inf", n)
	bw.WriteString("kvrouter_epp_decision_seconds_sum " + strconv.FormatFloat(float64(c.decisionNanos.Load())/1e9, 'g', -1, 64) + "\n")
	bw.WriteString("kvrouter_epp_decision_seconds_count " + strconv.FormatUint(n, 10) + "\n")
	return bw.Flush()
}
