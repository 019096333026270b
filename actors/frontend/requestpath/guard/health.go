package guard

import "time"

// HealthConfig configures a Health: the consecutive failed checks that
// make an endpoint unhealthy and the consecutive passed ones that make it
// healthy again. Zero fields take the defaults.
type HealthConfig struct {
	Failures, Successes int
}

// Health check defaults: SGLang's model gateway's thresholds.
const (
	DefaultHealthFailures  = 3
	DefaultHealthSuccesses = 2
)

// WithDefaults fills the zero fields.
func (c HealthConfig) WithDefaults() HealthConfig {
	if c.Failures <= 0 {
		c.Failures = DefaultHealthFailures
	}
	if c.Successes <= 0 {
		c.Successes = DefaultHealthSuccesses
	}
	return c
}

// Health is one serving endpoint's active health state: healthy until
// Failures checks in a row fail, then unhealthy until Successes in a row
// pass. An endpoint not checked yet is healthy (the router does not hold
// back a new engine for a check interval; its breaker guards the first
// requests). A plain value: the caller holds the lock.
type Health struct {
	cfg     HealthConfig
	down    bool
	fails   int // consecutive failed checks
	passes  int // consecutive passed checks
	checks  uint64
	failed  uint64
	lastErr string
}

// NewHealth returns a healthy endpoint's state.
func NewHealth(cfg HealthConfig) Health { return Health{cfg: cfg.WithDefaults()} }

// Record counts one check (errText "" : passed) and reports whether the
// endpoint changed between healthy and unhealthy.
func (h *Health) Record(errText string) (changed bool) {
	h.checks++
	if errText == "" {
		h.fails, h.passes = 0, h.passes+1
		if h.down && h.passes >= h.cfg.Successes {
			h.down = false
			return true
		}
		return false
	}
	h.failed++
	h.lastErr = errText
	h.passes, h.fails = 0, h.fails+1
	if !h.down && h.fails >= h.cfg.Failures {
		h.down = true
		return true
	}
	return false
}

// Healthy reports whether the endpoint may get requests.
func (h *Health) Healthy() bool { return !h.down }

// HealthInfo is what /workers shows of an endpoint's health.
type HealthInfo struct {
	Healthy        bool
	Fails, Passes  int // consecutive
	Checks, Failed uint64
	LastError      string
}

// Info describes the state.
func (h *Health) Info() HealthInfo {
	return HealthInfo{Healthy: !h.down, Fails: h.fails, Passes: h.passes, Checks: h.checks, Failed: h.failed, LastError: h.lastErr}
}

// Trip opens the breaker at now, whatever its state (an endpoint whose
// health checks fail); changed reports a state change.
func (b *Breaker) Trip(now time.Time) (changed bool) {
	if b.state == Open {
		return false
	}
	b.open(now)
	return true
}

// EndCoolDown makes an open breaker half-open at now (an endpoint whose
// health checks pass again: the cool-down is served), so probes go
// through at once.
func (b *Breaker) EndCoolDown(now time.Time) {
	if b.state == Open {
		b.openedAt = now.Add(-b.cfg.CoolDown)
	}
}
