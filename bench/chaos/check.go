package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/messages"
)

// Truth is what one engine stream holds, from the engine itself
// (simengine.Engine.Contents), and whether the router could know all of it.
type Truth struct {
	Stream messages.StreamID
	// Held is the engine's cache: its engine block hashes, sorted.
	Held []messages.ExternalHash
	// HistoryHeld: the router was given the replay endpoint and the replay
	// buffer still holds every batch since the engine's cache was last
	// empty, so nothing the engine holds may be missing from the index.
	HistoryHeld bool
}

// Observed is what the router shows for the whole index, after quiescence:
// the blocks per (worker, dp_rank) (pipeline.Snapshot) and the streams'
// states (pipeline.Status).
type Observed struct {
	Blocks map[messages.WorkerKey][]messages.ExternalHash
	States map[messages.StreamID]coalescer.StreamState
}

// Rule names a convergence rule a stream broke.
type Rule string

// The checker's rules.
const (
	// RulePhantom: the index holds a block the engine does not. Never
	// allowed: routing to it sends a request where its prefix is not.
	RulePhantom Rule = "phantom"
	// RuleMissing: a block the engine holds is missing from the index
	// although the replay buffer held its history.
	RuleMissing Rule = "missing"
	// RuleUndeclared: a block is missing and the stream is not flagged
	// degraded.
	RuleUndeclared Rule = "undeclared_loss"
)

// Violation is one broken rule on one stream, with a sample of the hashes.
type Violation struct {
	Rule   Rule
	Count  int
	Sample []messages.ExternalHash // up to sampleSize hashes
}

const sampleSize = 5

// StreamReport is the checker's verdict on one stream.
type StreamReport struct {
	Stream      messages.StreamID
	State       coalescer.StreamState
	HistoryHeld bool
	Held        int // blocks the engine holds
	Indexed     int // blocks the index holds for it
	Violations  []Violation
}

// OK reports whether the stream broke no rule.
func (r StreamReport) OK() bool { return len(r.Violations) == 0 }

// String formats the verdict on one line.
func (r StreamReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker %d rank %d: %s, engine %d blocks, index %d, history held %v",
		r.Stream.Worker, r.Stream.DpRank, r.State, r.Held, r.Indexed, r.HistoryHeld)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "; %s ×%d %v", v.Rule, v.Count, v.Sample)
	}
	return b.String()
}

// Check compares every engine stream with what the router shows (the
// engines' streams are dp rank 0 of their own worker, as the trials
// configure them). A (worker, dp_rank) the index holds blocks for but no
// engine reports is a stream whose every block is a phantom.
func Check(truths []Truth, obs Observed) []StreamReport {
	reports := make([]StreamReport, 0, len(truths))
	known := map[messages.WorkerKey]bool{}
	for _, t := range truths {
		key := messages.WorkerKey{Worker: t.Stream.Worker, DpRank: t.Stream.DpRank}
		known[key] = true
		reports = append(reports, CheckStream(t, obs.Blocks[key], obs.States[t.Stream]))
	}
	for key, blocks := range obs.Blocks {
		if !known[key] && len(blocks) > 0 {
			s := messages.StreamID{Worker: key.Worker, DpRank: key.DpRank}
			reports = append(reports, CheckStream(Truth{Stream: s}, blocks, obs.States[s]))
		}
	}
	slices.SortFunc(reports, func(a, b StreamReport) int {
		return cmp.Or(cmp.Compare(a.Stream.Worker, b.Stream.Worker), cmp.Compare(a.Stream.DpRank, b.Stream.DpRank))
	})
	return reports
}

// CheckStream applies the rules to one stream: indexed (sorted) against the
// engine's truth, given the stream's state.
//
//   - 0 phantom blocks, always;
//   - 0 missing blocks when the history was held;
//   - otherwise missing blocks only on a stream flagged degraded.
func CheckStream(t Truth, indexed []messages.ExternalHash, state coalescer.StreamState) StreamReport {
	r := StreamReport{Stream: t.Stream, State: state, HistoryHeld: t.HistoryHeld, Held: len(t.Held), Indexed: len(indexed)}
	phantom, missing := diff(indexed, t.Held), diff(t.Held, indexed)
	add := func(rule Rule, hs []messages.ExternalHash) {
		if len(hs) > 0 {
			r.Violations = append(r.Violations, Violation{Rule: rule, Count: len(hs), Sample: hs[:min(len(hs), sampleSize)]})
		}
	}
	add(RulePhantom, phantom)
	if t.HistoryHeld {
		add(RuleMissing, missing)
	}
	if state != coalescer.StateDegraded {
		add(RuleUndeclared, missing)
	}
	return r
}

// diff returns the hashes of a (sorted) that b (sorted) lacks.
func diff(a, b []messages.ExternalHash) []messages.ExternalHash {
	var out []messages.ExternalHash
	j := 0
	for _, h := range a {
		for j < len(b) && b[j] < h {
			j++
		}
		if j == len(b) || b[j] != h {
			out = append(out, h)
		}
	}
	return out
}
