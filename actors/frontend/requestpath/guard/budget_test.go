package guard

import (
	"testing"
	"time"
)

// TestBudget: retries stay within Ratio × requests + Min over the window,
// and come back as the window moves on.
func TestBudget(t *testing.T) {
	b := NewBudget(0.1, 2, 10*time.Second)
	for range 50 {
		b.Request(t0)
	}
	got := 0
	for range 20 {
		if b.Retry(t0) {
			got++
		}
	}
	if got != 7 { // 0.1 × 50 + 2
		t.Fatalf("%d retries for 50 requests, want 7", got)
	}
	later := t0.Add(11 * time.Second)
	if !b.Retry(later) || !b.Retry(later) || b.Retry(later) {
		t.Fatal("after the window: want exactly Min retries with no requests")
	}
	none := NewBudget(-1, -1, time.Second)
	none.Request(t0)
	if none.Retry(t0) {
		t.Fatal("a budget with no ratio and no minimum allowed a retry")
	}
}

// TestBackoff: the n-th delay grows by the multiplier up to Max, and the
// jitter keeps it within ±Jitter.
func TestBackoff(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2}.WithDefaults()
	for _, c := range []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0.5, 100 * time.Millisecond},
		{2, 0.5, 200 * time.Millisecond},
		{3, 0.5, 400 * time.Millisecond},
		{5, 0.5, time.Second}, // capped
		{1, 0, 80 * time.Millisecond},
		{1, 0.999999, 120 * time.Millisecond},
	} {
		if got := b.Delay(c.n, c.u); got < c.want-time.Microsecond || got > c.want+time.Microsecond {
			t.Errorf("Delay(%d, %g) = %v, want %v", c.n, c.u, got, c.want)
		}
	}
}

// TestBucket: a bucket passes its burst at once, then Rate a second; a
// take larger than the burst passes from a full bucket and leaves debt;
// Wait says how long until the next take passes.
func TestBucket(t *testing.T) {
	b := NewBucket(2, 4)
	for i := range 4 {
		if w := b.Wait(t0, 1); w != 0 {
			t.Fatalf("take %d of the burst waits %v", i, w)
		}
		b.Spend(t0, 1)
	}
	if w := b.Wait(t0, 1); w != 500*time.Millisecond {
		t.Fatalf("empty bucket: wait %v, want 500ms", w)
	}
	if w := b.Wait(t0.Add(500*time.Millisecond), 1); w != 0 {
		t.Fatalf("after 500ms: wait %v, want 0", w)
	}
	big := NewBucket(10, 10)
	if w := big.Wait(t0, 25); w != 0 {
		t.Fatalf("full bucket refused a take past its burst (wait %v)", w)
	}
	big.Spend(t0, 25) // 15 in debt
	if w := big.Wait(t0, 1); w != 1600*time.Millisecond {
		t.Fatalf("in debt of 15 at 10/s: wait %v, want 1.6s", w)
	}
	if big.Full(t0.Add(2 * time.Second)) {
		t.Fatal("full 2 s after a debt of 15 at 10/s")
	}
	if !big.Full(t0.Add(2500 * time.Millisecond)) {
		t.Fatal("not full 2.5 s after")
	}
	free := NewBucket(0, 0)
	if free.Wait(t0, 1e9) != 0 {
		t.Fatal("a rate of 0 limited")
	}
}
