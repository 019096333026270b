package guard

import (
	"math"
	"time"
)

// Budget bounds retries fleet-wide: over the last Window, retries stay
// at most Ratio × requests + Min (Min lets a quiet router still retry).
// A plain value: the caller passes the time and holds the lock.
type Budget struct {
	Ratio    float64
	Min      int
	requests Window // every request counts as good
	retries  Window
}

// Budget defaults: a retry for at most one request in five, at least 10
// retries per window of 10 s.
const (
	DefaultBudgetRatio  = 0.2
	DefaultBudgetMin    = 10
	DefaultBudgetWindow = 10 * time.Second
)

// NewBudget returns a budget (ratio < 0: no retries past min; zero
// fields: the defaults).
func NewBudget(ratio float64, minRetries int, window time.Duration) Budget {
	if ratio == 0 {
		ratio = DefaultBudgetRatio
	}
	if minRetries == 0 {
		minRetries = DefaultBudgetMin
	}
	if window <= 0 {
		window = DefaultBudgetWindow
	}
	return Budget{Ratio: max(ratio, 0), Min: max(minRetries, 0), requests: Window{Span: window}, retries: Window{Span: window}}
}

// Request counts a request at now.
func (b *Budget) Request(now time.Time) { b.requests.Add(now, true) }

// Retry takes a retry from the budget at now, or reports it spent.
func (b *Budget) Retry(now time.Time) bool {
	reqs, _ := b.requests.Counts(now)
	done, _ := b.retries.Counts(now)
	if float64(done) >= math.Floor(b.Ratio*float64(reqs))+float64(b.Min) {
		return false
	}
	b.retries.Add(now, true)
	return true
}

// Backoff is exponential backoff with jitter: the n-th retry (n ≥ 1)
// waits Initial × Multiplier^(n-1), at most Max, times a random factor
// in [1-Jitter, 1+Jitter).
type Backoff struct {
	Initial, Max time.Duration
	Multiplier   float64
	Jitter       float64
}

// Backoff defaults: SGLang's gateway's start, factor and jitter, with a
// lower ceiling (a retry here is at most a few candidates deep).
const (
	DefaultBackoffInitial    = 50 * time.Millisecond
	DefaultBackoffMax        = 2 * time.Second
	DefaultBackoffMultiplier = 1.5
	DefaultBackoffJitter     = 0.2
)

// WithDefaults fills the zero fields (a negative Jitter: none).
func (b Backoff) WithDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoffInitial
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoffMax
	}
	if b.Multiplier < 1 {
		b.Multiplier = DefaultBackoffMultiplier
	}
	switch {
	case b.Jitter == 0:
		b.Jitter = DefaultBackoffJitter
	case b.Jitter < 0:
		b.Jitter = 0
	case b.Jitter > 1:
		b.Jitter = 1
	}
	return b
}

// Delay is the wait before retry n (n ≥ 1) for a uniform draw u in
// [0, 1).
func (b Backoff) Delay(n int, u float64) time.Duration {
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(max(n, 1)-1))
	d = min(d, float64(b.Max))
	return time.Duration(d * (1 + b.Jitter*(2*u-1)))
}
