package listener

import (
	"fmt"
	"testing"
	"time"
)

func TestRecoveryBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type loss struct {
		at        time.Duration // after t0
		seq, next uint64
		want      bool
		rebuilt   bool // instead: a rebuild asked by the index, to next
		restarted bool // instead: a new publisher
	}
	cases := []struct {
		name   string
		losses []loss
	}{
		{"a loss recovers", []loss{{seq: 3, next: 10, want: true}}},
		{"the same batch lost again on its re-delivery starts no other",
			[]loss{{seq: 3, next: 10, want: true}, {seq: 3, next: 10}, {seq: 9, next: 10}, {seq: 10, next: 12, want: true}}},
		{"at most recoverBurst per recoverWindow", []loss{
			{seq: 1, next: 2, want: true}, {seq: 2, next: 3, want: true}, {seq: 3, next: 4, want: true},
			{seq: 4, next: 5, want: true}, {seq: 5, next: 6, want: true}, {seq: 6, next: 7},
			{at: recoverWindow + time.Second, seq: 7, next: 8, want: true}}},
		{"a rebuild re-delivers too", []loss{{rebuilt: true, next: 10}, {seq: 4, next: 10}, {seq: 10, next: 11, want: true}}},
		{"a restarted publisher's seqs start over", []loss{{seq: 8, next: 10, want: true}, {restarted: true}, {seq: 2, next: 4, want: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b recoveryBudget
			for i, l := range c.losses {
				switch {
				case l.rebuilt:
					b.rebuilt(l.next)
				case l.restarted:
					b.restarted()
				default:
					if got := b.allow(t0.Add(l.at), l.seq, l.next); got != l.want {
						t.Fatalf("loss %d (seq %d): allowed %v, want %v", i, l.seq, got, l.want)
					}
				}
			}
		})
	}
}

// Only the running replay's answers are current; starting another or
// abandoning it cancels its goroutine and outdates what it still sends.
func TestReplayRuns(t *testing.T) {
	var r replayRuns
	cancelled := map[uint64]bool{}
	start := func() uint64 {
		var gen uint64
		gen = r.start(func() { cancelled[gen] = true })
		return gen
	}
	if r.current(0) || r.abandon() {
		t.Fatal("no replay runs yet: nothing current, nothing to abandon")
	}
	first := start()
	if !r.current(first) {
		t.Fatal("the running replay's answers are not current")
	}
	second := start()
	if r.current(first) || !cancelled[first] || !r.current(second) {
		t.Fatalf("a replay started over another: first current %v cancelled %v, second current %v",
			r.current(first), cancelled[first], r.current(second))
	}
	if !r.abandon() || r.current(second) || !cancelled[second] {
		t.Fatal("an abandoned replay's answers are still current or its goroutine runs on")
	}
	if r.abandon() {
		t.Fatal("abandoned twice")
	}
	third := start()
	if third == second || !r.current(third) || fmt.Sprint(len(cancelled)) != "2" {
		t.Fatalf("a replay after an abandoned one: gen %d after %d, cancelled %v", third, second, cancelled)
	}
}
