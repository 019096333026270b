// Package expiry sheds route-path work nobody waits for any more.
//
// A request on the route path (an index shard's lookup, the session
// index's credit, the route actor's decision) carries the time its asker stops waiting for the
// answer: Deadline, the asker's own timeout from when it sent the
// request. Past saturation a stage's queue outgrows that timeout, and
// without this check every request would still be worked on, each
// answer arriving after its asker gave up: full work, no answer used. A
// stage that takes a request past its deadline answers it ErrExpired at
// once instead, without doing the work, and counts it by stage
// (kvrouter_route_expired_total{stage}); its queue then drains at the
// cost of a clock read per expired request, leaving the core to the
// requests behind them. It does not help requests that expire before any
// stage (on a core scheduling thousands of connections: bench/README.md,
// "Pinned load").
//
// The counters are process-wide, like actors/mailbox's depths: every
// stage's actors add to its atomic counter, and only the metrics read
// them.
package expiry

import (
	"errors"
	"sync/atomic"
	"time"
)

// ErrExpired is the answer to a request a stage took after its deadline.
var ErrExpired = errors.New("deadline passed before the request was handled")

// Passed reports whether a request due by deadline is past it at now; a
// zero deadline never passes (a caller that set none).
func Passed(deadline, now time.Time) bool {
	return !deadline.IsZero() && !now.Before(deadline)
}

// Stage is a step of the route path that sheds expired requests.
type Stage uint8

// The stages (the metric's stage label: String).
const (
	Shard   Stage = iota // an index shard's lookup
	Route                // the route actor's decision
	Session              // the session index's credit for a route
	stages
)

var names = [stages]string{Shard: "shard", Route: "route", Session: "session"}

// String is the stage's label.
func (s Stage) String() string { return names[s] }

var expired [stages]atomic.Uint64

// Count counts one request stage s answered ErrExpired.
func Count(s Stage) { expired[s].Add(1) }

// Expired is one stage's count.
type Expired struct {
	Stage Stage
	N     uint64
}

// Counts returns every stage's count of expired requests, in stage order.
func Counts() []Expired {
	out := make([]Expired, stages)
	for s := range stages {
		out[s] = Expired{Stage: s, N: expired[s].Load()}
	}
	return out
}
