package coalescer

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/mailbox"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
)

// StreamState is whether the index holds a stream exactly.
type StreamState string

// Stream states (also reported by /workers).
const (
	StateUnknown  StreamState = "unknown"  // no batch yet
	StateExact    StreamState = "exact"    // every batch since an empty cache was applied
	StateDegraded StreamState = "degraded" // history was lost; blocks may be missing (never phantom)
)

// StatusRequest asks the hub for every stream's state (answered with
// *Status).
type StatusRequest struct{}

// Status maps each endpoint stream to its state and last applied seq.
type Status struct {
	Streams map[messages.StreamID]StreamStatus
}

// StreamStatus is one endpoint stream's state.
type StreamStatus struct {
	State   StreamState
	LastSeq uint64
	Events  uint64 // router events emitted
	// Lag is how long the last batch took from its listener to here (its
	// events on their way to the index): how far the index trails the
	// engine's stream, ZeroMQ queues aside.
	Lag time.Duration
}

// HubProps returns the coalescer hub: it forwards each NormalizedBatch to the
// child actor of its endpoint stream, spawning it on first use; a child that
// crashes is restarted with exponential backoff (its stream is then cleared
// in the index and marked degraded). Other streams are not affected.
func HubProps(index *actor.PID, cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &hub{index: index, cfg: cfg, children: map[messages.StreamID]*actor.PID{},
			status: map[messages.StreamID]StreamStatus{}}
	}, actor.WithSupervisor(actor.NewExponentialBackoffStrategy(time.Minute, 100*time.Millisecond)), mailbox.Counted(mailbox.Coalescer))
}

type hub struct {
	index    *actor.PID
	cfg      Config
	children map[messages.StreamID]*actor.PID
	status   map[messages.StreamID]StreamStatus
}

// statusUpdate is a child's report of its state to the hub.
type statusUpdate struct {
	stream messages.StreamID
	status StreamStatus
}

func (h *hub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.NormalizedBatch:
		child, ok := h.children[m.Stream]
		if !ok {
			props := actor.PropsFromProducer(func() actor.Actor {
				return &streamActor{stream: m.Stream, index: h.index, cfg: h.cfg, ranks: map[messages.DpRank]*Stream{}}
			}, mailbox.Counted(mailbox.Coalescer))
			name := fmt.Sprintf("w%d-r%d", m.Stream.Worker, m.Stream.DpRank)
			child = ctx.SpawnPrefix(props, name)
			h.children[m.Stream] = child
		}
		ctx.Forward(child)
	case statusUpdate:
		h.status[m.stream] = m.status
	case *StatusRequest:
		s := &Status{Streams: make(map[messages.StreamID]StreamStatus, len(h.status))}
		for k, v := range h.status {
			s.Streams[k] = v
		}
		ctx.Respond(s)
	}
}

// streamActor coalesces one endpoint stream (one Stream core per dp rank the
// stream carries) and sends the result to the index, which acknowledges the
// batch to its listener once applied (RouterEventBatch.Ack); a batch that
// emits nothing is acknowledged here at once.
type streamActor struct {
	stream messages.StreamID
	index  *actor.PID
	cfg    Config
	ranks  map[messages.DpRank]*Stream
	status StreamStatus
	out    []messages.RouterEvent
	// unknownParents is the ranks' Stats.UnknownParents total; resumed says
	// the stream continues a loaded dump, whose stores the coalescers never
	// saw (until a clear), so an unknown parent proves nothing.
	unknownParents uint64
	resumed        bool
}

func (s *streamActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.status.State = StateUnknown
	case *actor.Restarting:
		// State is lost with the crash: the index must forget the stream.
		sp := restartSpan(s.stream)
		ctx.Send(s.index, &messages.RouterEventBatch{Clear: []messages.WorkerKey{
			{Worker: s.stream.Worker, DpRank: s.stream.DpRank}},
			Position: messages.Position{Stream: s.stream}, Trace: sp.Context()})
		sp.End()
		ctx.Send(ctx.Parent(), statusUpdate{s.stream, StreamStatus{State: StateDegraded}})
	case *messages.NormalizedBatch:
		s.batch(ctx, m)
	}
}

// checkParents degrades an exact stream whose engine stored a block under
// a parent the stream never stored: the engine kept blocks from before the
// history kvrouter holds (a publisher restarted without emptying its
// cache), so blocks may be missing.
func (s *streamActor) checkParents(sp tracectx.Span) {
	var n uint64
	for _, st := range s.ranks {
		n += st.Stats().UnknownParents
	}
	if n > s.unknownParents && s.status.State == StateExact && !s.resumed {
		s.status.State = StateDegraded
		sp.AddEvent(EventUnknownParent)
	}
	s.unknownParents = n
}

// rank returns the coalescer of one dp rank of the stream, created on
// first use.
func (s *streamActor) rank(r messages.DpRank) *Stream {
	st := s.ranks[r]
	if st == nil {
		st = New(messages.WorkerKey{Worker: s.stream.Worker, DpRank: r}, s.cfg)
		s.ranks[r] = st
	}
	return st
}

func (s *streamActor) batch(ctx actor.Context, m *messages.NormalizedBatch) {
	sp := tracer.Child(m.Trace, SpanCoalesce)
	defer sp.End()
	out := s.out[:0]
	if m.Resync.Keep {
		// Resumed from a loaded dump: the index holds the registered rank's
		// state; remember the rank so a later resync clears it.
		s.rank(s.stream.DpRank)
		s.resumed = true
	} else if m.Resync.Reason != "" {
		s.resumed = false
		// Drop the stream's state in the index, in band and in order: a
		// Cleared event for every rank this stream has carried, and for its
		// registered rank even if it has carried nothing yet (the index may
		// hold state loaded from a peer's dump for it).
		s.rank(s.stream.DpRank)
		for rank, st := range s.ranks {
			out = st.Push(messages.PlacementEvent{
				Placement: messages.Placement{Worker: messages.WorkerKey{Worker: s.stream.Worker, DpRank: rank}},
				Event:     messages.KvCacheEvent{Kind: messages.KindCleared, DpRank: rank},
			}, out)
		}
	}
	if m.Resync.Reason != "" {
		s.status.State = StateDegraded
		if m.Resync.Exact {
			s.status.State = StateExact
		}
		if sp.Recording() {
			sp.AddEvent(EventResync, tracectx.Reason.String(m.Resync.Reason), tracectx.Exact.Bool(m.Resync.Exact),
				ranksKey.Int(len(s.ranks)))
		}
	}
	for _, ev := range m.Events {
		st := s.rank(ev.Placement.Worker.DpRank)
		if ev.Event.Kind == messages.KindCleared {
			s.resumed = false
			if s.status.State == StateDegraded {
				s.status.State = StateExact // the engine emptied its cache: nothing can be missing now
			}
			sp.AddEvent(EventEngineCleared)
		}
		out = st.Push(ev, out)
	}
	s.checkParents(sp)
	for _, st := range s.ranks {
		out = st.Flush(out)
	}
	var ack *messages.Ack
	if m.Listener != nil {
		ack = &messages.Ack{To: m.Listener, Applied: messages.Applied{Stream: m.Stream, Seq: m.Seq, Count: 1, Lost: m.Lost}}
	}
	if len(out) > 0 {
		ctx.Send(s.index, &messages.RouterEventBatch{Events: append([]messages.RouterEvent(nil), out...),
			Position: messages.Position{Stream: s.stream, Seq: m.Seq, Exact: s.status.State == StateExact, Known: true},
			Trace:    sp.Context(), Ack: ack})
		s.status.Events += uint64(len(out))
	} else if ack != nil {
		ctx.Send(ack.To, &ack.Applied) // nothing for the index to apply
	}
	if sp.Recording() {
		sp.SetAttributes(tracectx.Worker.Int64(int64(s.stream.Worker)), tracectx.DpRank.Int64(int64(s.stream.DpRank)),
			tracectx.Seq.Int64(int64(m.Seq)), tracectx.Events.Int(len(m.Events)), emittedKey.Int(len(out)),
			stateKey.String(string(s.status.State)))
	}
	clear(out) // the batch sent holds its own copy: keep no event's blocks alive until the next batch
	s.out = out[:0]
	s.status.LastSeq = m.Seq
	if m.ReceivedAt != 0 {
		s.status.Lag = time.Duration(time.Now().UnixNano() - m.ReceivedAt)
	}
	ctx.Send(ctx.Parent(), statusUpdate{s.stream, s.status})
}
