package clusterindex

import (
	"maps"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// census is one round of a shard activation's account of who feeds it: it
// asks every member which streams its listeners feed into the shard
// (Claim) and, in a recovering round (a fresh activation: the slice is
// lost), waits until each claimed stream has been re-fed from its
// engine's replay buffer (Refed). Plain data, no I/O: the grain sends the
// requests and feeds the answers in.
//
// A round is done when every member asked has claimed and every claimed
// stream has been re-fed (a recovering round) — or, for a member that
// leaves meanwhile, when the grain starts a new round without it. The
// workers the shard held when the round began that no member claims are
// orphans: their listener's host left, so nothing keeps them true.
type census struct {
	round   uint64
	recover bool
	waiting map[string]bool             // members yet to claim
	claimed map[messages.WorkerID]bool  // workers some member feeds
	pending map[messages.WorkerKey]bool // claimed streams not yet re-fed (recovering rounds)
	refed   map[messages.WorkerKey]bool // streams re-fed this round, claimed or not yet
	held    []messages.WorkerID         // the shard's workers when the round began
	inexact map[messages.WorkerKey]bool // streams re-fed without their whole history
	members map[string]bool             // the members of the round's topology
	hosting bool                        // a member hosts another activation of the shard (it hands over)
}

// newCensus starts round of a shard that holds the held workers, asking
// members; recover says the slice is being rebuilt.
func newCensus(round uint64, recover bool, members []string, held []messages.WorkerID) *census {
	c := &census{round: round, recover: recover, waiting: map[string]bool{}, claimed: map[messages.WorkerID]bool{},
		pending: map[messages.WorkerKey]bool{}, refed: map[messages.WorkerKey]bool{}, held: held,
		inexact: map[messages.WorkerKey]bool{}, members: map[string]bool{}}
	for _, m := range members {
		c.waiting[m], c.members[m] = true, true
	}
	return c
}

// asking returns the members that have not claimed yet, sorted.
func (c *census) asking() []string { return slices.Sorted(maps.Keys(c.waiting)) }

// claim records a member's streams and whether it hosts another
// activation of the shard (a repeated claim is ignored).
func (c *census) claim(member string, streams []messages.WorkerKey, hosting bool) {
	if !c.waiting[member] {
		return
	}
	delete(c.waiting, member)
	c.hosting = c.hosting || hosting
	for _, s := range streams {
		c.claimed[s.Worker] = true
		if c.recover && !c.refed[s] {
			c.pending[s] = true
		}
	}
}

// fed records that a stream was re-fed; exact false flags it degraded.
func (c *census) fed(s messages.WorkerKey, exact bool) {
	c.refed[s] = true
	delete(c.pending, s)
	if !exact {
		c.inexact[s] = true
	}
}

// lost reports whether a member of the round's topology is absent from
// alive (a new round is needed: the lost member's streams are orphans,
// and it will never claim).
func (c *census) lost(alive []string) bool {
	for m := range c.members {
		if !slices.Contains(alive, m) {
			return true
		}
	}
	return false
}

// done reports whether every member claimed and every claimed stream was
// re-fed.
func (c *census) done() bool { return len(c.waiting) == 0 && len(c.pending) == 0 }

// degraded counts the streams re-fed without their whole history.
func (c *census) degraded() int { return len(c.inexact) }

// orphans returns the workers held when the round began that no member
// claims, sorted.
func (c *census) orphans() []messages.WorkerID {
	var out []messages.WorkerID
	for _, w := range c.held {
		if !c.claimed[w] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}
