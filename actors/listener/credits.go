package listener

import "context"

// credits is a counting semaphore between a socket goroutine and its
// listener actor: the goroutine takes one credit per batch it hands over
// and waits when none is left; the actor gives it back once the batch has
// left the listener (acknowledged downstream, or dropped). So the batches
// one goroutine has handed over and not seen through — in the actor's
// mailbox, held by the Tracker or in flight downstream — never exceed the
// window, however fast the socket reads.
type credits struct{ used chan struct{} }

func newCredits(window int) *credits { return &credits{used: make(chan struct{}, window)} }

// take waits for a credit; false when ctx ended first.
func (c *credits) take(ctx context.Context) bool {
	select {
	case c.used <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// give returns n credits (never more than were taken).
func (c *credits) give(n int) {
	for range n {
		select {
		case <-c.used:
		default:
			return
		}
	}
}
