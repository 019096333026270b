package guard

import (
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

// allowRecord lets one request through at now and records its outcome;
// it fails the test when the breaker refuses.
func allowRecord(t *testing.T, b *Breaker, now time.Time, good bool) {
	t.Helper()
	tk, ok, _ := b.Allow(now)
	if !ok {
		t.Fatalf("breaker refused at %v (state %v)", now.Sub(t0), b.State(now))
	}
	b.Record(now, tk, good)
}

// TestBreakerCycle: N consecutive failures open; nothing passes while
// open; after the cool-down it half-opens for Probes requests at once;
// M successful probes close it.
func TestBreakerCycle(t *testing.T) {
	b := NewBreaker(BreakerConfig{Failures: 3, ErrorRate: -1, CoolDown: 10 * time.Second, Probes: 1, Successes: 2})
	now := t0
	allowRecord(t, &b, now, false)
	allowRecord(t, &b, now, false)
	allowRecord(t, &b, now, true) // a success resets the count
	allowRecord(t, &b, now, false)
	allowRecord(t, &b, now, false)
	if b.State(now) != Closed {
		t.Fatalf("state %v after 2 consecutive failures, want closed", b.State(now))
	}
	tk, _, _ := b.Allow(now)
	if changed := b.Record(now, tk, false); !changed || b.State(now) != Open {
		t.Fatalf("third consecutive failure: changed %v state %v, want open", changed, b.State(now))
	}
	for _, d := range []time.Duration{0, time.Second, 9999 * time.Millisecond} {
		if _, ok, _ := b.Allow(now.Add(d)); ok || b.Admits(now.Add(d)) {
			t.Fatalf("open breaker let a request through %v after opening", d)
		}
	}
	now = now.Add(10 * time.Second)
	if !b.Admits(now) {
		t.Fatal("cooled-down breaker does not admit")
	}
	p1, ok, changed := b.Allow(now)
	if !ok || !changed || !p1.Probe() || b.State(now) != HalfOpen {
		t.Fatalf("first probe: ok %v changed %v probe %v state %v", ok, changed, p1.Probe(), b.State(now))
	}
	if _, ok, _ := b.Allow(now); ok || b.Admits(now) {
		t.Fatal("half-open breaker let a second probe through at once")
	}
	b.Record(now, p1, true)
	p2, ok, _ := b.Allow(now)
	if !ok {
		t.Fatal("no second probe after the first succeeded")
	}
	if changed := b.Record(now, p2, true); !changed || b.State(now) != Closed {
		t.Fatalf("after 2 successful probes: changed %v state %v, want closed", changed, b.State(now))
	}
}

// TestBreakerProbeFailureReopens: a failed probe opens the breaker again
// for a whole cool-down; a released probe frees its slot.
func TestBreakerProbeFailureReopens(t *testing.T) {
	b := NewBreaker(BreakerConfig{Failures: 1, ErrorRate: -1, CoolDown: 5 * time.Second, Successes: 1})
	allowRecord(t, &b, t0, false)
	now := t0.Add(5 * time.Second)
	p, _, _ := b.Allow(now)
	b.Release(p) // the client went away: no verdict
	p, ok, _ := b.Allow(now)
	if !ok {
		t.Fatal("a released probe kept its slot")
	}
	b.Record(now, p, false)
	if b.State(now.Add(4*time.Second)) != Open {
		t.Fatalf("failed probe: state %v, want open", b.State(now.Add(4*time.Second)))
	}
	if b.State(now.Add(5*time.Second)) != HalfOpen {
		t.Fatal("not half-open a cool-down after the failed probe")
	}
}

// TestBreakerErrorRate: failures that are never consecutive enough open
// the breaker by their share of the window, once it has MinSamples; old
// outcomes leave the window.
func TestBreakerErrorRate(t *testing.T) {
	b := NewBreaker(BreakerConfig{Failures: 100, ErrorRate: 0.5, MinSamples: 10, Window: 10 * time.Second})
	now := t0
	for i := range 9 { // good, bad alternating: 4 bad of 9, then the 10th is bad
		allowRecord(t, &b, now, i%2 == 0)
	}
	if b.State(now) != Closed {
		t.Fatal("opened below MinSamples")
	}
	allowRecord(t, &b, now, false) // 5 bad of 10
	if b.State(now) != Open {
		t.Fatalf("state %v at 50%% errors over 10 samples, want open", b.State(now))
	}
	// The same pattern spread over more than a window never reaches it.
	c := NewBreaker(BreakerConfig{Failures: 100, ErrorRate: 0.5, MinSamples: 10, Window: 10 * time.Second})
	for i := range 40 {
		allowRecord(t, &c, t0.Add(time.Duration(i)*2*time.Second), i%4 == 0 || i%4 == 1 || i%4 == 2)
	}
	if c.State(t0.Add(80*time.Second)) != Closed {
		t.Fatal("25% errors opened a 50% breaker")
	}
}

// TestBreakerStaleTicket: an outcome of a request let through before the
// breaker opened does not count as a probe.
func TestBreakerStaleTicket(t *testing.T) {
	b := NewBreaker(BreakerConfig{Failures: 1, ErrorRate: -1, CoolDown: time.Second, Successes: 1})
	old, _, _ := b.Allow(t0)
	allowRecord(t, &b, t0, false)
	now := t0.Add(time.Second)
	b.Allow(now) // half-open, probe out
	if b.Record(now, old, true); b.State(now) != HalfOpen {
		t.Fatalf("a stale success closed the breaker (state %v)", b.State(now))
	}
}
