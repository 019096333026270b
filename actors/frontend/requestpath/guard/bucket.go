package guard

import (
	"math"
	"time"
)

// Bucket is a token bucket: Rate tokens a second, at most Burst held. A
// take of n tokens passes when the bucket holds min(n, Burst) — so a
// request larger than the burst passes from a full bucket and leaves it
// in debt, refilled before the next one passes. A plain value: the caller
// passes the time and holds the lock. A Rate of 0 means no limit.
type Bucket struct {
	Rate, Burst float64
	tokens      float64
	last        time.Time
	started     bool
}

// NewBucket returns a full bucket (burst ≤ 0: one second's worth, at
// least 1).
func NewBucket(rate, burst float64) Bucket {
	if burst <= 0 {
		burst = max(rate, 1)
	}
	return Bucket{Rate: rate, Burst: burst, tokens: burst}
}

func (b *Bucket) refill(now time.Time) {
	if b.started && now.After(b.last) {
		b.tokens = min(b.Burst, b.tokens+now.Sub(b.last).Seconds()*b.Rate)
	}
	if !b.started || now.After(b.last) {
		b.last, b.started = now, true
	}
}

// Wait is how long until n tokens could be taken at now (0: now).
func (b *Bucket) Wait(now time.Time, n float64) time.Duration {
	if b.Rate <= 0 || n <= 0 {
		return 0
	}
	b.refill(now)
	need := min(n, b.Burst)
	if b.tokens >= need {
		return 0
	}
	return max(time.Duration(math.Ceil((need-b.tokens)/b.Rate*float64(time.Second))), 1)
}

// Spend takes n tokens at now, into debt if need be (after a Wait of 0,
// or to charge what a request turned out to cost).
func (b *Bucket) Spend(now time.Time, n float64) {
	if b.Rate <= 0 || n <= 0 {
		return
	}
	b.refill(now)
	b.tokens -= n
}

// Full reports whether the bucket holds its whole burst at now (an idle
// key that can be forgotten: it would start full again).
func (b *Bucket) Full(now time.Time) bool {
	b.refill(now)
	return b.tokens >= b.Burst
}
