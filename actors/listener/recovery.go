package listener

import (
	"context"
	"time"
)

// A stream recovers at most recoverBurst times per recoverWindow: a
// publisher that keeps sending batches kvrouter cannot apply costs a
// bounded number of full replays (the stream stays degraded in between).
const (
	recoverBurst  = 5
	recoverWindow = time.Minute
)

// recoveryBudget decides, as a plain value, whether a batch the pipeline
// could not apply starts a recovery (a rebuild from the replay buffer):
// once per lost batch — a batch lost again when a recovery re-delivers it
// starts no other — and at most recoverBurst per recoverWindow.
type recoveryBudget struct {
	// below: batches under it were re-delivered by the last recovery or
	// rebuild; times are the recent recoveries, oldest first.
	below uint64
	times []time.Time
}

// allow reports whether the loss of batch seq at now starts a recovery
// that re-delivers every batch below next, and counts it if so.
func (b *recoveryBudget) allow(now time.Time, seq, next uint64) bool {
	for len(b.times) > 0 && now.Sub(b.times[0]) > recoverWindow {
		b.times = b.times[1:]
	}
	if seq < b.below || len(b.times) >= recoverBurst {
		return false
	}
	b.below = next
	b.times = append(b.times, now)
	return true
}

// rebuilt records a rebuild asked by the index: it re-delivers every batch
// below next too, without spending the budget.
func (b *recoveryBudget) rebuilt(next uint64) { b.below = next }

// restarted records a new publisher: its seqs start over.
func (b *recoveryBudget) restarted() { b.below = 0 }

// replayRuns numbers the listener's replays, a plain value: one runs at a
// time, and the answers of a replay that was replaced or abandoned (its
// goroutine may have sent them before it saw its cancellation) carry an
// old number and are ignored.
type replayRuns struct {
	gen    uint64
	cancel context.CancelFunc // stops the running replay's goroutine; nil when none runs
}

// start abandons the running replay, if any, and numbers a new one whose
// goroutine cancel stops.
func (r *replayRuns) start(cancel context.CancelFunc) uint64 {
	if r.cancel != nil {
		r.cancel()
	}
	r.gen++
	r.cancel = cancel
	return r.gen
}

// current reports whether an answer numbered gen is the running replay's.
func (r *replayRuns) current(gen uint64) bool { return r.cancel != nil && gen == r.gen }

// abandon stops the running replay: its late answers are no longer
// current. False when none runs.
func (r *replayRuns) abandon() bool {
	if r.cancel == nil {
		return false
	}
	r.cancel()
	r.cancel, r.gen = nil, r.gen+1
	return true
}
