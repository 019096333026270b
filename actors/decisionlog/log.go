// Package decisionlog keeps the latest routing decisions for the fleet
// page (GET /decisions, GET /ui): a fixed ring of api.Decision, allocated
// once, that a route request writes into without ever waiting.
//
// Why lossy: the record is read by people, the route path is hot. A
// writer that finds the ring busy (another route request writing, or a
// reader copying it) drops its decision and counts it (Skipped) instead of
// queueing behind the lock; so the cost a route request pays is one
// TryLock, a copy of one decision into a slot and two atomic adds (the
// token totals) — no allocation, no channel, no goroutine. Scores are kept only when the decision carries
// them (the request asked include_scores, which already paid for them):
// the best DecisionScores by logit, copied into the slot's own array.
//
// The obvious alternative, a channel to a collecting goroutine, costs a
// send (and a wake-up) per route request and still needs a bound; a
// sync.Mutex with Lock would make a burst of routes queue behind a page
// refresh.
package decisionlog

import (
	"sync"
	"sync/atomic"

	"github.com/kvrouter/kvrouter/messages/api"
)

// DefaultCapacity is the decisions a Log keeps when New is given none.
const DefaultCapacity = 256

// Log is the ring. It is safe for concurrent use.
type Log struct {
	recorded, skipped, prompt, cached atomic.Uint64

	mu     sync.Mutex
	next   int // slot of the next decision
	filled int
	ring   []api.Decision
	scores [][api.DecisionScores]api.RouteScore // ring[i].Scores's backing array
}

// New returns a Log of capacity decisions (DefaultCapacity when <= 0).
func New(capacity int) *Log {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Log{ring: make([]api.Decision, capacity), scores: make([][api.DecisionScores]api.RouteScore, capacity)}
}

// Capacity is the decisions the Log keeps at most.
func (l *Log) Capacity() int { return len(l.ring) }

// Record keeps d (its Scores are ignored) and the best of scores, unless
// the ring is busy: then d is dropped and counted. Its tokens are counted
// in the totals either way.
func (l *Log) Record(d api.Decision, scores []api.RouteScore) {
	l.prompt.Add(uint64(max(d.PromptTokens, 0)))
	l.cached.Add(d.CachedTokens)
	var best [api.DecisionScores]api.RouteScore
	n := selectBest(&best, scores)
	if !l.mu.TryLock() {
		l.skipped.Add(1)
		return
	}
	i := l.next
	l.scores[i] = best
	d.Scores = l.scores[i][:n:n]
	d.Candidates = len(scores)
	l.ring[i] = d
	l.next = (i + 1) % len(l.ring)
	l.filled = min(l.filled+1, len(l.ring))
	l.mu.Unlock()
	l.recorded.Add(1)
}

// selectBest writes the scores of lowest logit into best, lowest first
// (insertion into a sorted prefix: len(scores) × DecisionScores steps at
// most), and returns how many it wrote.
func selectBest(best *[api.DecisionScores]api.RouteScore, scores []api.RouteScore) int {
	n := 0
	for _, s := range scores {
		if n == len(best) && s.Logit >= best[n-1].Logit {
			continue
		}
		j := min(n, len(best)-1)
		for j > 0 && best[j-1].Logit > s.Logit {
			best[j] = best[j-1]
			j--
		}
		best[j] = s
		n = min(n+1, len(best))
	}
	return n
}

// Snapshot returns a copy of what the Log holds, newest decision first.
func (l *Log) Snapshot() api.DecisionLog {
	l.mu.Lock()
	out := make([]api.Decision, l.filled)
	for k := range out {
		i := (l.next - 1 - k + 2*len(l.ring)) % len(l.ring)
		d := l.ring[i]
		d.Scores = append([]api.RouteScore{}, d.Scores...)
		out[k] = d
	}
	l.mu.Unlock()
	return api.DecisionLog{Capacity: len(l.ring), Recorded: l.recorded.Load(), Skipped: l.skipped.Load(),
		PromptTokens: l.prompt.Load(), CachedTokens: l.cached.Load(), Decisions: out}
}
