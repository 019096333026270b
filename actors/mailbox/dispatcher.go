package mailbox

import "sync/atomic"

// turns is the dispatcher of every counted mailbox.
var turns = newDispatcher(throughput, maxParked)

const (
	// throughput is the messages a mailbox handles per turn before it
	// yields (protoactor's default).
	throughput = 300
	// maxParked bounds the goroutines kept waiting for a turn; one that
	// finishes a turn while that many wait ends.
	maxParked = 128
)

// dispatcher runs mailbox turns on goroutines it keeps. protoactor's
// default dispatcher starts a goroutine per turn (a turn: the mailbox was
// idle and got a message), and a fresh goroutine grows its stack again
// on the way into the actor's handler (runtime.newstack/copystack: ~5 %
// of the router's CPU on the ingest path, one turn per batch per actor at
// the rates where mailboxes drain). Here a turn goes to a goroutine
// parked after an earlier turn, whose stack has grown already, when one
// waits; otherwise to a new goroutine, as before. Nothing bounds the
// goroutines running turns (a handler that blocks never holds up
// another mailbox); only the parked ones are bounded.
type dispatcher struct {
	throughput int
	maxParked  int64
	parked     atomic.Int64
	idle       chan func()
}

func newDispatcher(throughput, maxParked int) *dispatcher {
	return &dispatcher{throughput: throughput, maxParked: int64(maxParked), idle: make(chan func())}
}

// Schedule implements actor.Dispatcher.
func (d *dispatcher) Schedule(fn func()) {
	select {
	case d.idle <- fn: // a parked goroutine takes it
	default:
		go d.work(fn)
	}
}

// Throughput implements actor.Dispatcher.
func (d *dispatcher) Throughput() int { return d.throughput }

// work runs fn, then the turns handed to it while it is parked, until it
// finishes a turn with maxParked goroutines already parked.
func (d *dispatcher) work(fn func()) {
	for {
		fn()
		if d.parked.Add(1) > d.maxParked {
			d.parked.Add(-1)
			return
		}
		fn = <-d.idle
		d.parked.Add(-1)
	}
}
