// Package reply answers a local request without a protoactor future.
//
// A future (RootContext.RequestFuture) registers a process under a fresh
// name in the actor system's registry, arms a time.AfterFunc and waits on
// a sync.Cond; the answer travels back as a message to that process. On
// the route path, where the actors answer in microseconds, that
// machinery cost about as much as the work (bench/README.md, "Index and
// routing"). Here the request carries a Chan instead: a buffered channel
// with room for every answer the asker waits for, which the actor sends
// its answer into (Send never blocks). The asker waits on it with a
// pooled timer, armed only when the answer is not there already (an actor
// on the synchronized dispatcher answers on the asker's goroutine).
//
// A request whose asker gave up is still answered into the buffer and
// collected with the channel: a channel is never reused. The channel is
// an in-process value, so only local actors get such requests; a request
// without a Chan (a remote or test caller using a future) is answered
// with ctx.Respond as before (Respond).
package reply

import (
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ErrTimeout is the error of a wait that ran out of time.
var ErrTimeout = errors.New("reply: timeout")

// Chan is where an actor answers one request (or, with room for n, the n
// parts of a fanned-out one).
type Chan[T any] chan T

// Make returns a Chan with room for n answers.
func Make[T any](n int) Chan[T] { return make(Chan[T], n) }

// Send puts an answer in c without blocking; an answer beyond the room
// the asker made is dropped.
func (c Chan[T]) Send(v T) {
	select {
	case c <- v:
	default:
	}
}

// Respond answers a request: into c when the request carries one, else
// to the context's sender (a future or a remote asker).
func Respond[T any](ctx actor.Context, c Chan[T], v T) {
	if c != nil {
		c.Send(v)
		return
	}
	ctx.Respond(v)
}

// Wait returns one answer from c, or ErrTimeout when none came within
// timeout.
func (c Chan[T]) Wait(timeout time.Duration) (T, error) {
	var d Deadline
	defer d.Stop()
	return c.Until(&d, timeout)
}

// Until returns one answer from c, or ErrTimeout when d expires first.
// An answer already there is taken without a timer; the first wait on d
// that finds none arms it, timeout from then, and later waits (a
// fan-out's other parts) share it.
func (c Chan[T]) Until(d *Deadline, timeout time.Duration) (T, error) {
	select {
	case v := <-c:
		return v, nil
	default:
	}
	if d.t == nil {
		d.t = timers.Get().(*time.Timer)
		d.t.Reset(timeout)
	}
	select {
	case v := <-c:
		return v, nil
	case <-d.t.C:
		var zero T
		return zero, ErrTimeout
	}
}

// Deadline is a pooled timer shared by waits on Chans (Until). The zero
// value is unarmed; Stop disarms it and returns its timer.
type Deadline struct{ t *time.Timer }

var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// Stop disarms the deadline and returns its timer to the pool. Since Go
// 1.23 a stopped timer's channel delivers nothing stale, so the timer's
// next user starts clean.
func (d *Deadline) Stop() {
	if d.t != nil {
		d.t.Stop()
		timers.Put(d.t)
		d.t = nil
	}
}

// FutureResult waits for a protoactor future and returns its answer or
// its error: f.Result() without the data race protoactor's futures have
// (upstream asynkron/protoactor-go issue 1145, open). A reply that
// reaches the future as it times out writes the future's result without
// its lock while the woken waiter reads it in Result, and the race
// detector fails the test that saw it (once, under load, in a status
// poll). FutureResult reads the result only when the future did not
// fail, so a timed-out wait reads only the error, which the timeout
// writes under the lock. Every future the router waits on goes through
// it.
func FutureResult(f *actor.Future) (any, error) {
	if err := f.Wait(); err != nil {
		return nil, err
	}
	return f.Result()
}
