package loadgen

import (
	"sync/atomic"
	"time"
)

// modelClock is the engine model's clock as kvrouter's route actor reads
// it (routing.Config.Now): the replay sets it to the model time of each
// arrival before it reports that arrival's prefill completions and frees
// and routes the request, so the route actor's predictions expire and its
// bookings age on the time the peer policies see. Safe for concurrent
// reads (the route actor runs on another goroutine than the replay).
//
// Until the replay drives it, and once the replay has handed it back to
// the wall clock (wall), it reads time.Now: the latency sweep and the
// memory measure that follow a replay run on the wall clock. Model time
// starts at modelEpoch, before any wall time, so the hand-over only moves
// the route actor's clock forward (its load and predictions keep the
// latest time they were given).
type modelClock struct {
	ns     atomic.Int64 // model time since modelEpoch
	driven atomic.Bool
}

// modelEpoch is model time 0.
var modelEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// set makes the clock read the model time at seconds.
func (c *modelClock) set(seconds float64) {
	c.ns.Store(int64(seconds * float64(time.Second)))
	c.driven.Store(true)
}

// wall hands the clock back to the wall clock.
func (c *modelClock) wall() { c.driven.Store(false) }

// Now is the model time while the replay drives the clock, else the wall
// clock's.
func (c *modelClock) Now() time.Time {
	if !c.driven.Load() {
		return time.Now()
	}
	return modelEpoch.Add(time.Duration(c.ns.Load()))
}
