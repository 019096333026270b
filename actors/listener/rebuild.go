package listener

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
)

// Rebuild asks a listener to rebuild its stream from the engine's replay
// buffer (Tracker.Recover: a resync that clears the stream, then
// everything the buffer holds), for an index that lost the stream's state
// — a cluster shard re-activated empty after its host left. Unlike the
// recoveries after a batch the pipeline could not apply, it is not
// rate-bounded: the index asks once per lost slice. The listener answers
// the sender with Rebuilt once the replay has ended and every batch it
// delivered has been acknowledged downstream (so the batches have left the
// index front, or in one process been applied, before the answer is
// sent). Tag is echoed. Stream names the stream the index lost: on a
// socket shared by topic, a pod's (answered at once, inexact: no replay);
// elsewhere the listener has one stream, and the answer names it.
type Rebuild struct {
	Stream messages.StreamID
	Tag    uint64
}

// Rebuilt answers Rebuild. Exact says the rebuilt stream is complete: the
// buffer held its history since the publisher's first batch. Otherwise
// the stream may miss blocks (the buffer lost history, the engine has no
// replay endpoint, the replay failed, or the listener stopped first) —
// never hold extra ones.
type Rebuilt struct {
	Stream messages.StreamID
	Tag    uint64
	Exact  bool
}

// rebuildState follows the rebuilds asked of a listener: who waits for
// them, whether the replay is still running, and how many acknowledgements
// are still due for the batches it delivered.
type rebuildState struct {
	waiting   []rebuildWaiter
	replaying bool
	acks      int  // batches in flight when the replay ended
	seen      bool // a resync was delivered during the rebuild
	exact     bool
}

type rebuildWaiter struct {
	tag uint64
	to  *actor.PID
}

// startRebuild handles Rebuild: without a replay endpoint (or on a socket
// shared by topic) there is nothing to replay and the answer is at once
// inexact, naming the stream asked for when the socket is shared by
// topic; otherwise the stream recovers, and a second Rebuild while one
// runs restarts the replay and is answered with it.
func (a *Actor) startRebuild(ctx actor.Context, m *Rebuild) {
	if ctx.Sender() == nil {
		return
	}
	w := rebuildWaiter{tag: m.Tag, to: ctx.Sender()}
	if a.cfg.TopicIdentity {
		ctx.Send(w.to, &Rebuilt{Stream: m.Stream, Tag: w.tag})
		return
	}
	if a.cfg.ReplayEndpoint == "" {
		ctx.Send(w.to, &Rebuilt{Stream: a.main.id, Tag: w.tag})
		return
	}
	a.rebuild.waiting = append(a.rebuild.waiting, w)
	a.rebuild.replaying, a.rebuild.seen, a.rebuild.exact = true, false, false
	a.stats.Rebuilds++
	next, _ := a.main.tracker.Next()
	a.recovery.rebuilt(next)
	a.do(ctx, a.main, a.main.tracker.Recover())
}

// rebuildResync notes a resync delivered during a rebuild: the stream is
// exact only if every resync since the rebuild began was.
func (a *Actor) rebuildResync(exact bool) {
	if a.rebuild.replaying {
		a.rebuild.exact = exact && (!a.rebuild.seen || a.rebuild.exact)
		a.rebuild.seen = true
	}
}

// rebuildProgress is called after the main stream's actions and after
// every acknowledgement (acked of them): once the replay is over, the
// batches in flight then are the last of the rebuild; when they are
// acknowledged, the waiters are answered.
func (a *Actor) rebuildProgress(ctx actor.Context, acked int) {
	r := &a.rebuild
	if len(r.waiting) == 0 {
		return
	}
	if r.replaying {
		if a.main.tracker.Replaying() {
			return
		}
		r.replaying, r.acks = false, a.window.inFlight()
	} else {
		r.acks -= acked
	}
	if r.acks <= 0 {
		a.answerRebuilds(ctx, r.seen && r.exact)
	}
}

// answerRebuilds answers every waiting Rebuild.
func (a *Actor) answerRebuilds(ctx actor.Context, exact bool) {
	for _, w := range a.rebuild.waiting {
		ctx.Send(w.to, &Rebuilt{Stream: a.main.id, Tag: w.tag, Exact: exact})
	}
	a.rebuild = rebuildState{}
}
