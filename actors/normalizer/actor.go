package normalizer

import (
	"cmp"
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/mailbox"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"github.com/kvrouter/kvrouter/messages/wire"
)

// Props returns one normalizer actor, which sends its NormalizedBatches to
// next. A pool of them (actors/pipeline) gives each worker's batches to
// one actor, always the same (Of), so they are normalized in order.
func Props(next *actor.PID, lim wire.Limits) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{next: next, lim: lim, workers: map[messages.StreamID]*Normalizer{}, lost: map[messages.StreamID]uint64{},
			decoders: map[string]*wire.Decoder{}, engines: map[messages.StreamID]*engine.Detector{}}
	}, mailbox.Counted(mailbox.Normalizer))
}

// Of is the actor of a pool of n that normalizes a stream's batches: by
// worker, so every dp rank of a worker goes to the same one.
func Of(s messages.StreamID, n int) int { return int(uint64(s.Worker) % uint64(n)) }

// PoolStats are one normalizer actor's counters.
type PoolStats struct {
	Batches    uint64
	BadBatches uint64 // payloads that were not batches (ErrNotBatch)
	Lost       uint64 // events lost to truncation
	// HistoryLost counts batches after which the stream's index state was
	// dropped because an event meant for it could not be applied (a bad
	// payload, a truncation, an event rejected for a reason that
	// messages.Reason.LosesHistory); StreamHistoryLost is the requested
	// stream's share.
	HistoryLost, StreamHistoryLost uint64
	Events                         Stats // summed over this actor's workers
	Stream                         Stats // the requested stream's own counters
	// StreamEngine is the requested stream's engine: its registration's
	// choice, what its batches showed, and any contradiction (zero before
	// its first batch).
	StreamEngine engine.Detection
}

// StatsRequest asks the normalizer that handles Stream (Of) for its
// counters (answered with *PoolStats; Stream fills its Stream field).
type StatsRequest struct{ Stream messages.StreamID }

// Actor decodes and normalizes the batches of the workers hashed to it. It
// keeps one Normalizer and one engine Detector per stream, and one decoder
// per engine: a stream's batches are decoded by its registration's engine,
// or with auto by the engine its batches showed (engine.Detector.Engine).
type Actor struct {
	next     *actor.PID
	lim      wire.Limits
	workers  map[messages.StreamID]*Normalizer
	lost     map[messages.StreamID]uint64 // PoolStats.HistoryLost by stream
	decoders map[string]*wire.Decoder
	engines  map[messages.StreamID]*engine.Detector
	stats    PoolStats
	log      *slog.Logger
	lastWarn time.Time
	// outcomes is Normalizer.Batch's output, reused batch to batch: it
	// never leaves the actor (the accepted events are copied into the
	// NormalizedBatch, which is sent and then not touched again).
	outcomes []Outcome
	// scratch is every stream's Normalizer's hashing scratch (one actor,
	// one goroutine at a time).
	scratch Scratch
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.log = ctx.Logger()
	case *messages.EngineBatch:
		a.batch(ctx, m)
	case *StatsRequest:
		s := a.stats
		for _, n := range a.workers {
			add(&s.Events, n.Stats())
		}
		if n := a.workers[m.Stream]; n != nil {
			s.Stream = n.Stats()
		}
		s.StreamHistoryLost = a.lost[m.Stream]
		if d := a.engines[m.Stream]; d != nil {
			s.StreamEngine = d.Detection()
		}
		ctx.Respond(&s)
	}
}

func (a *Actor) batch(ctx actor.Context, m *messages.EngineBatch) {
	a.stats.Batches++
	sp := tracer.Child(m.Trace, SpanNormalize)
	out := &messages.NormalizedBatch{Stream: m.Stream, Seq: m.Seq, Resync: m.Resync,
		ReceivedAt: m.ReceivedAt, Listener: m.Listener, Trace: sp.Context()}
	lost := true // until the batch is read
	// Always: the batch must be acknowledged, and a resync applied.
	defer func() {
		if lost {
			a.stats.HistoryLost++
			a.lost[m.Stream]++
			out.Resync, out.Lost = lostHistory(out.Resync), true
		}
		ctx.Send(a.next, out)
		sp.End()
	}()
	if m.Payload == nil {
		lost = false // a marker: only its resync applies
		return
	}
	det := a.engines[m.Stream]
	if det == nil || det.Choice() != cmp.Or(m.Engine, engine.Auto) { // first batch, or registered again
		det = engine.NewDetector(m.Engine)
		a.engines[m.Stream] = det
	}
	dec, err := a.decoder(det.Engine())
	if err != nil {
		a.warn("unknown engine", "engine", m.Engine)
		sp.AddEvent(EventDropped, tracectx.Reason.String("unknown_engine"))
		return
	}
	b, err := dec.Decode(m.Payload)
	if err != nil {
		a.stats.BadBatches++
		if errors.Is(err, wire.ErrNotBatch) {
			a.warn("dropped a payload that is not a batch", "worker", m.Stream.Worker, "seq", m.Seq, "err", err)
		}
		if sp.Recording() {
			sp.AddEvent(EventDropped, tracectx.Reason.String("not_batch"), errorKey.String(err.Error()))
		}
		return
	}
	if det.Observe(m.Seq, b.Layout) {
		d := det.Detection()
		a.log.Warn("the stream contradicts its registered engine: decoded as registered, check the registration",
			"worker", m.Stream.Worker, "dp_rank", m.Stream.DpRank, "engine", d.Choice, "shows", d.Conflict, "looks_like", d.Detected)
	}
	a.stats.Lost += uint64(b.Lost)
	lost = b.Lost > 0
	n := a.workers[m.Stream]
	if n == nil {
		n = New(Config{Worker: m.Stream.Worker, DpRank: m.Stream.DpRank, BlockSize: m.BlockSize, Scratch: &a.scratch})
		a.workers[m.Stream] = n
	}
	mismatched := n.Stats().Rejected[messages.ReasonBlockSizeMismatch]
	a.warnHints(m.Stream, m.Seq, b)
	a.outcomes = n.Batch(b, a.outcomes[:0])
	out.Events = accepted(a.outcomes)
	for i := range a.outcomes {
		lost = lost || a.outcomes[i].Reason.LosesHistory()
	}
	clear(a.outcomes) // keeps no event's slices alive past the batch
	if cap(a.outcomes) > maxKeptOutcomes {
		a.outcomes = nil // a huge batch does not pin its buffer
	}
	if sp.Recording() {
		sp.SetAttributes(tracectx.Worker.Int64(int64(m.Stream.Worker)), tracectx.DpRank.Int64(int64(m.Stream.DpRank)),
			tracectx.Seq.Int64(int64(m.Seq)), tracectx.Events.Int(len(b.Events)+b.Lost),
			acceptedKey.Int(len(out.Events)), lostKey.Int(b.Lost))
	}
	if mismatched == 0 && n.Stats().Rejected[messages.ReasonBlockSizeMismatch] > 0 {
		a.log.Error("worker sends blocks of another size than configured: its events are rejected",
			"worker", m.Stream.Worker, "dp_rank", m.Stream.DpRank, "configured", m.BlockSize)
	}
}

// maxKeptOutcomes is the largest outcome buffer an Actor keeps between
// batches.
const maxKeptOutcomes = 1024

// accepted returns the accepted outcomes' events in order, in a slice of
// their exact length (one allocation, none when nothing was accepted).
func accepted(outcomes []Outcome) []messages.PlacementEvent {
	n := 0
	for i := range outcomes {
		if outcomes[i].Accepted() {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	events := make([]messages.PlacementEvent, 0, n)
	for i := range outcomes {
		if outcomes[i].Accepted() {
			events = append(events, outcomes[i].Event)
		}
	}
	return events
}

// lostHistory turns a batch's resync into one that drops the stream's
// state before the batch and leaves it degraded: part of what the engine
// did is unknown.
func lostHistory(r messages.Resync) messages.Resync {
	if r.Reason == "" || r.Keep {
		r.Reason = "events_lost"
	}
	r.Exact, r.Keep = false, false
	return r
}

func (a *Actor) decoder(name string) (*wire.Decoder, error) {
	if d, ok := a.decoders[name]; ok {
		return d, nil
	}
	ad, err := engine.Choose(name)
	if err != nil {
		return nil, err
	}
	d := ad.NewDecoder(a.lim)
	a.decoders[name] = d
	return d, nil
}

// warnHints logs (rate-limited) the first hint dropped from a batch: the
// events are kept, but the engine sends something it should not.
func (a *Actor) warnHints(s messages.StreamID, seq uint64, b *wire.Batch) {
	if b.Dropped != 0 {
		a.warn("dropped an unusable batch timestamp; the events are kept", "worker", s.Worker, "seq", seq)
	}
	for i := range b.Events {
		if ev := &b.Events[i]; ev.Dropped != 0 {
			a.warn("dropped an unusable optional field; the event is kept", "worker", s.Worker, "seq", seq,
				"tag", ev.Tag, "detail", ev.DroppedDetail)
			return
		}
	}
}

// warn logs at most once a second: bad input must not flood the log.
func (a *Actor) warn(msg string, args ...any) {
	if now := time.Now(); now.Sub(a.lastWarn) >= time.Second {
		a.lastWarn = now
		a.log.Warn(msg, args...)
	}
}

func add(dst *Stats, s Stats) {
	for i := range dst.Accepted {
		dst.Accepted[i] += s.Accepted[i]
	}
	for i := range dst.Rejected {
		dst.Rejected[i] += s.Rejected[i]
	}
	dst.Blocks += s.Blocks
	dst.NamespaceOverflow += s.NamespaceOverflow
	for i := range dst.DroppedHints {
		dst.DroppedHints[i] += s.DroppedHints[i]
	}
}
