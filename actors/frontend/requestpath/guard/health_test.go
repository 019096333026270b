package guard

import (
	"testing"
	"time"
)

// Healthy until 3 checks in a row fail (a pass in between resets the
// count), then unhealthy until 2 in a row pass.
func TestHealthThresholds(t *testing.T) {
	h := NewHealth(HealthConfig{})
	steps := []struct {
		err     string
		healthy bool
		changed bool
	}{
		{"", true, false}, {"503", true, false}, {"503", true, false}, {"", true, false},
		{"refused", true, false}, {"refused", true, false}, {"timeout", false, true},
		{"", false, false}, {"503", false, false}, {"", false, false}, {"", true, true}, {"", true, false},
	}
	for i, s := range steps {
		if changed := h.Record(s.err); changed != s.changed || h.Healthy() != s.healthy {
			t.Fatalf("step %d (%q): healthy %v changed %v, want %v %v", i, s.err, h.Healthy(), changed, s.healthy, s.changed)
		}
	}
	if in := h.Info(); in.Checks != 12 || in.Failed != 6 || in.LastError != "503" || in.Passes != 3 || in.Fails != 0 {
		t.Fatalf("info %+v", in)
	}
}

// A failing endpoint trips its breaker open; its checks passing again end
// the cool-down, so probes go through at once.
func TestBreakerTripAndEndCoolDown(t *testing.T) {
	now := time.Unix(1000, 0)
	b := NewBreaker(BreakerConfig{CoolDown: time.Minute})
	if !b.Trip(now) || b.State(now) != Open || b.Trip(now) {
		t.Fatalf("trip: %v", b.State(now))
	}
	b.EndCoolDown(now.Add(time.Second))
	if b.State(now.Add(time.Second)) != HalfOpen || !b.Admits(now.Add(time.Second)) {
		t.Fatalf("after the cool-down ended: %v", b.State(now.Add(time.Second)))
	}
	c := NewBreaker(BreakerConfig{})
	c.EndCoolDown(now)
	if c.State(now) != Closed {
		t.Fatalf("a closed breaker's cool-down ended: %v", c.State(now))
	}
}
