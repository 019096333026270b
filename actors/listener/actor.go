package listener

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/engine"
)

// Stats are one listener's counters.
type Stats struct {
	Received   uint64            // live batches received
	Delivered  uint64            // batches passed downstream
	BadFrames  map[string]uint64 // messages dropped before the tracker, by why
	Resyncs    map[string]uint64 // by ResyncReason
	Replays    map[string]uint64 // by result: ok, timeout, error
	InFlight   int
	Replaying  bool
	NextSeq    uint64
	Subscribed uint64 // socket (re)creations
}

// StatsRequest asks a listener for its Stats (answered with ctx.Respond).
type StatsRequest struct{}

// Actor is one engine endpoint's listener.
type Actor struct {
	cfg     Config
	adapter engine.Adapter
	tracker *Tracker
	gate    *gate
	cancel  context.CancelFunc
	ctx     context.Context

	replayGen    uint64
	replayCancel context.CancelFunc
	resync       messages.Resync // to attach to the next delivered batch
	inFlight     int
	stats        Stats
	log          *slog.Logger
}

// Props returns the listener's props; cfg is validated first.
func Props(cfg Config) (*actor.Props, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	adapter, _ := engine.Lookup(cfg.Engine)
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{
			cfg:     cfg,
			adapter: adapter,
			tracker: NewTracker(TrackerConfig{
				Replay:          cfg.ReplayEndpoint != "",
				SeqStartsAtZero: adapter.Stream().SeqStartsAtZero,
			}),
			gate: newGate(),
			stats: Stats{BadFrames: map[string]uint64{}, Resyncs: map[string]uint64{},
				Replays: map[string]uint64{}},
		}
	}), nil
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case subscribed:
		a.stats.Subscribed++
		if a.stats.Subscribed == 1 {
			a.do(ctx, a.tracker.Start())
		}
	case liveBatch:
		a.stats.Received++
		a.do(ctx, a.tracker.Live(m.seq, m.payload))
	case replayBatch:
		if m.gen == a.replayGen {
			a.do(ctx, a.tracker.Replayed(m.seq, m.payload))
		}
	case replayDone:
		if m.gen != a.replayGen {
			return
		}
		switch {
		case m.err != "":
			a.stats.Replays["error"]++
			a.log.Warn("replay failed", "endpoint", a.cfg.ReplayEndpoint, "err", m.err)
			a.do(ctx, a.tracker.ReplayTimeout())
		case m.timeout:
			a.stats.Replays["timeout"]++
			a.do(ctx, a.tracker.ReplayTimeout())
		default:
			a.stats.Replays["ok"]++
			a.do(ctx, a.tracker.ReplayEnd())
		}
	case badFrame:
		a.stats.BadFrames[m.why]++
	case *messages.Applied:
		a.inFlight -= m.Count
		if a.inFlight < a.cfg.Window/2 {
			a.gate.set(true)
		}
	case *StatsRequest:
		s := a.stats
		s.InFlight, s.Replaying = a.inFlight, a.tracker.Replaying()
		s.NextSeq, _ = a.tracker.Next()
		s.BadFrames, s.Resyncs, s.Replays = copyMap(s.BadFrames), copyMap(s.Resyncs), copyMap(s.Replays)
		ctx.Respond(&s)
	case *actor.Stopping, *actor.Restarting:
		// The sockets' goroutines end with the incarnation that started
		// them; a restarted listener starts afresh (and its first batch
		// resyncs the stream).
		a.cancel()
	}
}

func (a *Actor) start(ctx actor.Context) {
	a.log = ctx.Logger().With("worker", a.cfg.Stream.Worker, "dp_rank", a.cfg.Stream.DpRank)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	self, root := ctx.Self(), ctx.ActorSystem().Root
	send := func(m any) { root.Send(self, m) }
	go subscribe(a.ctx, a.cfg, a.gate, send)
}

// do carries out the tracker's actions in order.
func (a *Actor) do(ctx actor.Context, acts []Action) {
	for _, act := range acts {
		switch act.Kind {
		case Resync:
			a.stats.Resyncs[act.Reason.String()]++
			a.resync = messages.Resync{Reason: act.Reason.String(), Exact: act.Exact}
			if !act.Exact {
				a.log.Warn("stream degraded: index state dropped", "reason", act.Reason.String())
			}
		case RequestReplay:
			a.startReplay(ctx, act.Seq)
		case Deliver:
			a.deliver(ctx, act.Seq, act.Payload)
		}
	}
	if !a.tracker.Replaying() && a.replayCancel != nil {
		a.replayCancel()
		a.replayCancel = nil
		a.replayGen++ // late answers of that replay are ignored
	}
}

func (a *Actor) startReplay(ctx actor.Context, from uint64) {
	if a.replayCancel != nil {
		a.replayCancel()
	}
	a.replayGen++
	rctx, cancel := context.WithCancel(a.ctx)
	a.replayCancel = cancel
	self, root, gen := ctx.Self(), ctx.ActorSystem().Root, a.replayGen
	go replay(rctx, a.cfg, a.adapter, gen, from, func(m any) { root.Send(self, m) })
}

func (a *Actor) deliver(ctx actor.Context, seq uint64, payload []byte) {
	ctx.Send(a.cfg.Next, &messages.EngineBatch{
		Stream:     a.cfg.Stream,
		Engine:     a.cfg.Engine,
		BlockSize:  a.cfg.BlockSize,
		Seq:        seq,
		Payload:    payload,
		Resync:     a.resync,
		ReceivedAt: time.Now().UnixNano(),
		Listener:   ctx.Self(),
	})
	a.resync = messages.Resync{}
	a.stats.Delivered++
	a.inFlight++
	if a.inFlight >= a.cfg.Window {
		a.gate.set(false)
	}
}

func copyMap(m map[string]uint64) map[string]uint64 {
	c := make(map[string]uint64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
