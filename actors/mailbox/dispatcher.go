package mailbox

import (
	"sync"
	"sync/atomic"
)

// turns is the dispatcher of every counted mailbox. It is never stopped.
var turns = NewDispatcher(throughput, maxParked)

const (
	// throughput is the messages a mailbox handles per turn before it
	// yields (protoactor's default).
	throughput = 300
	// maxParked bounds the goroutines turns keeps waiting for a turn; one
	// that finishes a turn while that many wait ends.
	maxParked = 128
)

// Dispatcher is a protoactor dispatcher that runs mailbox turns on
// goroutines it keeps. protoactor's default dispatcher starts a goroutine
// per turn (a turn: the mailbox was idle and got a message), and a fresh
// goroutine grows its stack again on the way into the actor's handler
// (runtime.newstack/copystack: ~5 % of the router's CPU on the ingest
// path, one turn per batch per actor at the rates where mailboxes drain;
// ~8 % of a route's CPU for an index shard, whose tree walk is deep).
// Here a turn goes to a goroutine parked after an earlier turn, whose
// stack has grown already, when one waits; otherwise to a new goroutine,
// as before. Nothing bounds the goroutines running turns (a handler that
// blocks never holds up another mailbox); only the parked ones are
// bounded. The counted mailboxes share one (Counted, CountedPriority); the
// index keeps one for its shards, stopped with it.
type Dispatcher struct {
	throughput int
	maxParked  int64
	parked     atomic.Int64
	idle       chan func() // unbuffered: a send succeeds only into a parked goroutine
	done       chan struct{}
	stop       sync.Once
}

// NewDispatcher returns a Dispatcher whose turns handle up to throughput
// messages and which keeps at most maxParked goroutines parked.
func NewDispatcher(throughput, maxParked int) *Dispatcher {
	return &Dispatcher{throughput: throughput, maxParked: int64(maxParked), idle: make(chan func()), done: make(chan struct{})}
}

// Schedule implements actor.Dispatcher.
func (d *Dispatcher) Schedule(fn func()) {
	select {
	case d.idle <- fn: // a parked goroutine takes it
	default:
		go d.work(fn)
	}
}

// Throughput implements actor.Dispatcher.
func (d *Dispatcher) Throughput() int { return d.throughput }

// Stop lets the parked goroutines end; a turn scheduled later runs on a
// goroutine that ends after it.
func (d *Dispatcher) Stop() { d.stop.Do(func() { close(d.done) }) }

// work runs fn, then the turns handed to it while it is parked, until it
// finishes a turn with maxParked goroutines already parked or the
// Dispatcher is stopped.
func (d *Dispatcher) work(fn func()) {
	for {
		fn()
		if d.parked.Add(1) > d.maxParked {
			d.parked.Add(-1)
			return
		}
		select {
		case fn = <-d.idle:
			d.parked.Add(-1)
		case <-d.done:
			d.parked.Add(-1)
			return
		}
	}
}
