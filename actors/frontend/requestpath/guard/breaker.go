package guard

import (
	"fmt"
	"time"
)

// BreakerConfig configures a Breaker. Zero fields take the defaults
// (DefaultBreakerConfig).
type BreakerConfig struct {
	// Failures opens the breaker after this many consecutive failures.
	Failures int
	// ErrorRate opens it when failures make at least this share of the
	// outcomes over Window, once there are MinSamples of them (a negative
	// rate turns the rule off).
	ErrorRate  float64
	MinSamples int
	Window     time.Duration
	// CoolDown is how long it stays open before it half-opens.
	CoolDown time.Duration
	// Probes bounds the requests let through at once while half-open.
	Probes int
	// Successes closes a half-open breaker after this many probes
	// succeeded; one failed probe opens it again.
	Successes int
}

// Breaker defaults: SGLang's model gateway's counts and times, plus an
// error-rate rule it does not have.
const (
	DefaultBreakerFailures   = 10
	DefaultBreakerErrorRate  = 0.5
	DefaultBreakerMinSamples = 20
	DefaultBreakerWindow     = 120 * time.Second
	DefaultBreakerCoolDown   = 60 * time.Second
	DefaultBreakerProbes     = 1
	DefaultBreakerSuccesses  = 3
)

// WithDefaults fills the zero fields.
func (c BreakerConfig) WithDefaults() BreakerConfig {
	if c.Failures <= 0 {
		c.Failures = DefaultBreakerFailures
	}
	if c.ErrorRate == 0 {
		c.ErrorRate = DefaultBreakerErrorRate
	}
	if c.MinSamples <= 0 {
		c.MinSamples = DefaultBreakerMinSamples
	}
	if c.Window <= 0 {
		c.Window = DefaultBreakerWindow
	}
	if c.CoolDown <= 0 {
		c.CoolDown = DefaultBreakerCoolDown
	}
	if c.Probes <= 0 {
		c.Probes = DefaultBreakerProbes
	}
	if c.Successes <= 0 {
		c.Successes = DefaultBreakerSuccesses
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c BreakerConfig) Validate() error {
	if c.ErrorRate > 1 {
		return fmt.Errorf("breaker error rate %g: want at most 1 (negative: off)", c.ErrorRate)
	}
	return nil
}

// BreakerState is a breaker's state.
type BreakerState uint8

// Breaker states.
const (
	Closed BreakerState = iota
	Open
	HalfOpen
)

// String is the state's name (metric label, /workers).
func (s BreakerState) String() string {
	return [...]string{"closed", "open", "half_open"}[s]
}

// Ticket is what Allow hands a request let through: Record takes it back
// with the outcome, Release without one. A probe is a request let through
// half-open; a ticket from before the last state change is stale and only
// counts in the window.
type Ticket struct {
	gen   uint64
	probe bool
}

// Probe reports whether the ticket is a half-open probe.
func (t Ticket) Probe() bool { return t.probe }

// Breaker is one serving endpoint's circuit breaker: Closed lets every
// request through and counts outcomes; Open lets none through until
// CoolDown has passed; HalfOpen lets Probes through at once and closes
// after Successes of them succeeded, or opens again at the first failure.
// A plain value: the caller passes the time and holds the lock.
type Breaker struct {
	cfg      BreakerConfig
	state    BreakerState
	gen      uint64 // bumped at every state change: older tickets are stale
	consec   int    // consecutive failures (closed)
	window   Window
	openedAt time.Time
	probing  int // probes out (half-open)
	passed   int // probes succeeded (half-open)
}

// NewBreaker returns a closed breaker.
func NewBreaker(cfg BreakerConfig) Breaker {
	cfg = cfg.WithDefaults()
	return Breaker{cfg: cfg, window: Window{Span: cfg.Window}}
}

// State is the breaker's state at now (an open breaker whose cool-down
// has passed is half-open).
func (b *Breaker) State(now time.Time) BreakerState {
	if b.state == Open && !now.Before(b.openedAt.Add(b.cfg.CoolDown)) {
		return HalfOpen
	}
	return b.state
}

// Admits reports whether Allow would let a request through at now,
// without taking a ticket (to rank candidates before one is tried).
func (b *Breaker) Admits(now time.Time) bool {
	switch b.State(now) {
	case Open:
		return false
	case HalfOpen:
		return b.state == Open || b.probing < b.cfg.Probes
	}
	return true
}

// Allow lets a request through at now, or not; changed reports a state
// change (open → half-open) for the caller to count.
func (b *Breaker) Allow(now time.Time) (t Ticket, ok, changed bool) {
	if b.state == Open && b.State(now) == HalfOpen {
		b.to(HalfOpen)
		changed = true
	}
	switch b.state {
	case Open:
		return Ticket{}, false, changed
	case HalfOpen:
		if b.probing >= b.cfg.Probes {
			return Ticket{}, false, changed
		}
		b.probing++
		return Ticket{gen: b.gen, probe: true}, true, changed
	}
	return Ticket{gen: b.gen}, true, changed
}

// Record takes a ticket back with its outcome at now; changed reports a
// state change.
func (b *Breaker) Record(now time.Time, t Ticket, good bool) (changed bool) {
	b.window.Add(now, good)
	if t.gen != b.gen {
		return false // from before the last change: the window only
	}
	switch b.state {
	case Closed:
		if good {
			b.consec = 0
			return false
		}
		b.consec++
		if b.consec >= b.cfg.Failures || b.rateOver(now) {
			b.open(now)
			return true
		}
	case HalfOpen:
		if t.probe {
			b.probing--
		}
		if !good {
			b.open(now)
			return true
		}
		if b.passed++; b.passed >= b.cfg.Successes {
			b.to(Closed)
			b.window.Reset()
			return true
		}
	}
	return false
}

// Release takes a ticket back without an outcome (the request ended
// before it said anything of the endpoint: the client went away).
func (b *Breaker) Release(t Ticket) {
	if t.gen == b.gen && t.probe && b.state == HalfOpen {
		b.probing--
	}
}

func (b *Breaker) rateOver(now time.Time) bool {
	if b.cfg.ErrorRate < 0 {
		return false
	}
	good, bad := b.window.Counts(now)
	n := good + bad
	return n >= uint64(b.cfg.MinSamples) && float64(bad) >= b.cfg.ErrorRate*float64(n)
}

func (b *Breaker) open(now time.Time) {
	b.to(Open)
	b.openedAt = now
}

func (b *Breaker) to(s BreakerState) {
	b.state, b.gen = s, b.gen+1
	b.consec, b.probing, b.passed = 0, 0, 0
}

// Info is what /workers shows of a breaker: its state at now, the
// consecutive failures, the window's counts, and when it opened.
type Info struct {
	State        BreakerState
	Consecutive  int
	Good, Bad    uint64
	OpenedAt     time.Time
	ProbesOut    int
	ProbesPassed int
	CoolDownEnds time.Time
}

// Info describes the breaker at now.
func (b *Breaker) Info(now time.Time) Info {
	good, bad := b.window.Counts(now)
	in := Info{State: b.State(now), Consecutive: b.consec, Good: good, Bad: bad, ProbesOut: b.probing, ProbesPassed: b.passed}
	if b.state == Open {
		in.OpenedAt, in.CoolDownEnds = b.openedAt, b.openedAt.Add(b.cfg.CoolDown)
	}
	return in
}
