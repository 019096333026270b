package loadgen

import (
	"testing"
	"time"
)

// The model clock reads the model time the replay set, from modelEpoch,
// and the wall clock before the replay drives it and after it hands it
// back (always later than any model time, so the route actor's clock
// only moves forward).
func TestModelClock(t *testing.T) {
	var c modelClock
	if got := c.Now(); time.Since(got) > time.Minute || got.Before(modelEpoch) {
		t.Fatalf("undriven: %v, want the wall clock", got)
	}
	c.set(2.5)
	if got, want := c.Now(), modelEpoch.Add(2500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("at model time 2.5 s: %v, want %v", got, want)
	}
	model := c.Now()
	c.wall()
	if got := c.Now(); !got.After(model) || time.Since(got) > time.Minute {
		t.Fatalf("handed back: %v, want the wall clock, after the model's %v", got, model)
	}
}
