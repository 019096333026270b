// Package mailbox counts, per kind of actor, the messages posted to their
// mailboxes and not yet handled (the one being handled included): the
// queue depth an operator watches
// (kvrouter_mailbox_depth{actor}). Mailboxes stay protoactor's unbounded
// ones: its blocking bounded mailbox (actor.Bounded) blocks the sender when
// full, and in a probe of the pinned version the sender never resumed after
// the receiver drained. The bound on what can queue comes from the
// listeners' credits instead (actors/listener/README.md, "Flow control"),
// and this makes that bound visible.
//
// The counters are process-wide, like a metrics registry: every actor of a
// kind adds to its kind's two atomic counters (a few nanoseconds per
// message), and nothing reads them but the metrics. Messages left in the
// mailbox of an actor that stops are never handled, so after stops the
// figure can stay above the true depth by that many.
//
// Counted mailboxes also share one dispatcher (dispatcher.go) that runs
// their turns on goroutines it keeps parked instead of a new goroutine per
// turn: on the ingest path a mailbox drains and is woken again for nearly
// every batch, and a fresh goroutine grew its stack again each time.
package mailbox

import (
	"sort"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Kinds of actors whose mailboxes are counted.
const (
	Listener   = "listener"
	Normalizer = "normalizer"
	Coalescer  = "coalescer"
	Index      = "index"
	Sessions   = "sessions"
	Route      = "route"
)

// depth is one kind's counters; it is the mailboxes' middleware.
type depth struct{ posted, received atomic.Int64 }

func (d *depth) MailboxStarted()     {}
func (d *depth) MessagePosted(any)   { d.posted.Add(1) }
func (d *depth) MessageReceived(any) { d.received.Add(1) }
func (d *depth) MailboxEmpty()       {}
func (d *depth) len() int64          { return max(0, d.posted.Load()-d.received.Load()) }

var kinds = map[string]*depth{
	Listener: {}, Normalizer: {}, Coalescer: {}, Index: {}, Sessions: {}, Route: {},
}

// Counted is the props option giving an actor of kind an unbounded mailbox
// whose depth is counted, run by the dispatcher that keeps its goroutines
// (dispatcher). An unknown kind panics: kinds are constants.
func Counted(kind string) actor.PropsOption {
	return with(actor.Unbounded(of(kind)))
}

// CountedPriority is Counted with protoactor's priority mailbox: a message
// with a GetPriority method is taken by priority, then in arrival order;
// others have the default priority. Only a message sent, not requested,
// can carry a priority (a request's envelope takes the default). The index
// shards use it so that route-path queries (requests) pass the applied
// batches still queued (messages.BackgroundPriority); their ordered reads
// are sent at the batches' priority.
func CountedPriority(kind string) actor.PropsOption {
	return with(actor.UnboundedPriority(of(kind)))
}

func with(m actor.MailboxProducer) actor.PropsOption {
	return func(p *actor.Props) {
		actor.WithMailbox(m)(p)
		actor.WithDispatcher(turns)(p)
	}
}

func of(kind string) *depth {
	d, ok := kinds[kind]
	if !ok {
		panic("mailbox: unknown actor kind " + kind)
	}
	return d
}

// Depth is one kind's messages posted and not yet handled.
type Depth struct {
	Kind string
	Len  int64
}

// Depths returns every kind's depth, by kind.
func Depths() []Depth {
	out := make([]Depth, 0, len(kinds))
	for k, d := range kinds {
		out = append(out, Depth{Kind: k, Len: d.len()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
