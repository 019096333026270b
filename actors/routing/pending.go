package routing

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// ErrNoPending: no pending selection under this id (never selected with
// one, expired, evicted, or already booked).
var ErrNoPending = errors.New("no pending selection")

// ErrNotCandidate: the rank a booking names is not a candidate (not
// registered in the namespace, or no longer).
var ErrNotCandidate = errors.New("not a candidate")

// Pending defaults: the reference selection service's.
const (
	DefaultPendingTTL = 2 * time.Minute
	DefaultMaxPending = 4096
)

// Booking is the load a request would add to a rank: what Load.Add takes.
type Booking struct {
	Key           messages.WorkerKey
	PrefillTokens int64
	Blocks        int64
}

// PendingStats counts what the pending selections saw; all only grow.
type PendingStats struct {
	Remembered uint64 // selections kept (a re-used id replaces its entry)
	Taken      uint64 // bookings made from one
	Missed     uint64 // Take of an id not pending
	Expired    uint64 // dropped at their TTL
	Evicted    uint64 // dropped, oldest first, to make room
}

// Pending holds the advisory selections a client named, so that a later
// booking of the same id (the reference's POST /reservations, replay
// form) books exactly what was selected without sending the prompt
// again. It is bounded (at most max entries, oldest evicted first) and
// each entry lives ttl. A plain value for one goroutine (the route
// actor's), no clock of its own.
type Pending struct {
	ttl     time.Duration
	max     int
	entries map[string]pendingEntry
	order   []pendingSlot // Remember order; a slot whose entry was replaced or dropped is skipped
	seq     uint64
	stats   PendingStats
}

type pendingEntry struct {
	b   Booking
	at  time.Time
	seq uint64 // of the Remember that made it: its order slot's
}

type pendingSlot struct {
	id  string
	seq uint64
}

// NewPending returns an empty table; ttl ≤ 0 and max ≤ 0 take the
// defaults.
func NewPending(ttl time.Duration, max int) *Pending {
	if ttl <= 0 {
		ttl = DefaultPendingTTL
	}
	if max <= 0 {
		max = DefaultMaxPending
	}
	return &Pending{ttl: ttl, max: max, entries: map[string]pendingEntry{}}
}

// Stats returns the counters.
func (p *Pending) Stats() PendingStats { return p.stats }

// Len returns the entries held (expired ones not yet dropped included).
func (p *Pending) Len() int { return len(p.entries) }

// Remember keeps b under id (replacing an entry of the same id: latest
// wins, as in the reference), dropping expired entries and, when full,
// the oldest.
func (p *Pending) Remember(id string, b Booking, now time.Time) {
	p.expire(now)
	if _, ok := p.entries[id]; !ok && len(p.entries) >= p.max {
		p.evictOldest()
	}
	p.seq++
	p.entries[id] = pendingEntry{b: b, at: now, seq: p.seq}
	p.order = append(p.order, pendingSlot{id, p.seq})
	p.stats.Remembered++
	if len(p.order) > 2*p.max { // drop the slots of replaced and forgotten entries
		p.order = slices.DeleteFunc(p.order, func(s pendingSlot) bool { return !p.current(s) })
	}
}

// Peek returns the booking pending under id (ErrNoPending when none or
// expired): the caller books it, then calls Forget, so that a booking that
// fails leaves the entry for a retry.
func (p *Pending) Peek(id string, now time.Time) (Booking, error) {
	e, ok := p.entries[id]
	if !ok || now.Sub(e.at) >= p.ttl {
		p.stats.Missed++
		return Booking{}, fmt.Errorf("routing: selection %q: %w", id, ErrNoPending)
	}
	return e.b, nil
}

// Forget drops id's entry: it was booked (taken true, counted) or an
// explicit booking of the id superseded it.
func (p *Pending) Forget(id string, taken bool) {
	if _, ok := p.entries[id]; ok {
		delete(p.entries, id)
		if taken {
			p.stats.Taken++
		}
	}
}

func (p *Pending) current(s pendingSlot) bool {
	e, ok := p.entries[s.id]
	return ok && e.seq == s.seq
}

// expire drops the entries older than the TTL, oldest first.
func (p *Pending) expire(now time.Time) {
	for len(p.order) > 0 {
		s := p.order[0]
		if p.current(s) {
			if now.Sub(p.entries[s.id].at) < p.ttl {
				return
			}
			delete(p.entries, s.id)
			p.stats.Expired++
		}
		p.order = p.order[1:]
	}
}

func (p *Pending) evictOldest() {
	for len(p.order) > 0 {
		s := p.order[0]
		p.order = p.order[1:]
		if p.current(s) {
			delete(p.entries, s.id)
			p.stats.Evicted++
			return
		}
	}
}
