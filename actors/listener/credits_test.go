package listener

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestCreditsBoundWhatTheSocketHandsOver(t *testing.T) {
	c := newCredits(2)
	ctx := context.Background()
	if !c.take(ctx) || !c.take(ctx) {
		t.Fatal("a window of 2 must give 2 credits")
	}
	passed := make(chan bool, 1)
	go func() { passed <- c.take(ctx) }()
	select {
	case <-passed:
		t.Fatal("a third batch passed a window of 2")
	case <-time.After(50 * time.Millisecond):
	}
	c.give(1)
	if !<-passed {
		t.Fatal("a returned credit did not release the reader")
	}
	c.give(5) // more than taken: only what was taken comes back
	for range 2 {
		if !c.take(ctx) {
			t.Fatal("the returned credits are not there")
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if c.take(cancelled) {
		t.Fatal("a cancelled reader must not pass a full window")
	}
}

// The window's account, step by step: what each goroutine took, what was
// delivered, held or acknowledged, and the credits settle gives back.
func TestWindowSettles(t *testing.T) {
	type op struct {
		kind byte // 'l'/'r' a live/replay batch taken, 'L'/'R' delivered, 'a' n acknowledged, 's' settle with n held
		n    int
	}
	type want struct{ live, replay, inFlight int }
	cases := []struct {
		name string
		ops  []op
		want []want // one per settle
	}{
		{"live batches come back once acknowledged",
			[]op{{'l', 0}, {'L', 0}, {'l', 0}, {'L', 0}, {'s', 0}, {'a', 1}, {'s', 0}, {'a', 1}, {'s', 0}},
			[]want{{0, 0, 2}, {1, 0, 1}, {1, 0, 0}}},
		{"a dropped live batch comes back at once",
			[]op{{'l', 0}, {'s', 0}}, []want{{1, 0, 0}}},
		{"held live batches keep their credits until delivered",
			[]op{{'l', 0}, {'l', 0}, {'s', 2}, {'L', 0}, {'L', 0}, {'s', 0}, {'a', 2}, {'s', 0}},
			[]want{{0, 0, 0}, {0, 0, 2}, {2, 0, 0}}},
		{"replay and live credits are apart: held live batches never stall the replay",
			[]op{{'l', 0}, {'r', 0}, {'R', 0}, {'r', 0}, {'R', 0}, {'s', 1}, {'a', 2}, {'s', 1}},
			[]want{{0, 0, 2}, {0, 2, 0}}},
		{"acknowledgements of batches in flight oldest first",
			[]op{{'r', 0}, {'R', 0}, {'l', 0}, {'L', 0}, {'a', 1}, {'s', 0}, {'a', 1}, {'s', 0}},
			[]want{{0, 1, 1}, {1, 0, 0}}},
		{"a previous incarnation's acknowledgements do not widen the window",
			[]op{{'l', 0}, {'L', 0}, {'a', 5}, {'s', 0}, {'l', 0}, {'L', 0}, {'a', 0}, {'s', 0}},
			[]want{{1, 0, 0}, {0, 0, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w window
			var got []want
			for _, o := range c.ops {
				switch o.kind {
				case 'l', 'r':
					w.took(o.kind == 'l')
				case 'L', 'R':
					w.delivered(o.kind == 'L')
				case 'a':
					w.acked(o.n)
				case 's':
					live, replay := w.settle(o.n)
					got = append(got, want{live, replay, w.inFlight()})
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("settled %v, want %v", got, c.want)
			}
		})
	}
}
