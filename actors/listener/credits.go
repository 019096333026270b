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

// window is the listener's account of its two credit windows, a plain
// value the actor keeps: the credits each socket goroutine took for
// batches it handed over, and, for each batch delivered downstream and not
// yet acknowledged (oldest first), whether it came from the subscription.
// settle says how many credits go back to each goroutine.
type window struct {
	liveTaken, replayTaken int
	origins                []bool // true: from the subscription
	liveInFlight           int    // of origins, those from the subscription
}

// took records a batch a goroutine handed over (one credit taken).
func (w *window) took(live bool) {
	if live {
		w.liveTaken++
	} else {
		w.replayTaken++
	}
}

// delivered records a batch passed downstream.
func (w *window) delivered(live bool) {
	w.origins = append(w.origins, live)
	if live {
		w.liveInFlight++
	}
}

// acked records that downstream acknowledged n batches, the oldest in
// flight, and returns how many of them were in flight here: an
// acknowledgement of a previous incarnation's batches (after a restart) is
// not this one's and must not widen the window.
func (w *window) acked(n int) int {
	n = min(n, len(w.origins))
	for _, live := range w.origins[:n] {
		if live {
			w.liveInFlight--
		}
	}
	w.origins = w.origins[n:]
	return n
}

// inFlight is the number of batches delivered and not yet acknowledged.
func (w *window) inFlight() int { return len(w.origins) }

// settle returns the credits the listener is done with, for the
// subscription and for the replay, and keeps the rest: the subscription's
// credits cover its batches in flight and the held ones (the Tracker holds
// live batches during a replay); the replay's cover its batches in flight.
// Held live batches never stall the replay that releases them. So at most
// two windows of batches are in flight (a replay's end delivers the held
// ones at once), however fast the sockets.
func (w *window) settle(held int) (live, replay int) {
	keepLive, keepReplay := held+w.liveInFlight, len(w.origins)-w.liveInFlight
	if w.liveTaken > keepLive {
		live, w.liveTaken = w.liveTaken-keepLive, keepLive
	}
	if w.replayTaken > keepReplay {
		replay, w.replayTaken = w.replayTaken-keepReplay, keepReplay
	}
	return live, replay
}
