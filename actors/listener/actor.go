package listener

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/mailbox"
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
	Gaps       uint64            // forward seq gaps seen live (Tracker.Gaps), all streams
	Recoveries uint64            // rebuilds by replay after a batch the pipeline could not apply
	Rebuilds   uint64            // rebuilds by replay asked by the index (Rebuild)
	InFlight   int
	Replaying  bool
	// Connected: the socket is subscribed (false from a socket error until
	// it is subscribed again).
	Connected  bool
	NextSeq    uint64 // of the configured stream (one engine per socket)
	Subscribed uint64 // socket (re)creations
	// Streams holds each stream's next seq when engines are told apart by
	// topic (Config.TopicIdentity); Topics the same streams' state, one per
	// pod, sorted by pod.
	Streams map[messages.StreamID]uint64
	Topics  []TopicStream
}

// Recovering reports whether the stream's state awaits verification: a
// replay runs, or the connection is down (what the engine did meanwhile is
// checked once it is back).
func (s *Stats) Recovering() bool { return s.Replaying || !s.Connected }

// StatsRequest asks a listener for its Stats (answered with ctx.Respond):
// the socket's, or with Pod, on a socket shared by topic, that pod's view
// (podStats).
type StatsRequest struct{ Pod string }

// stream is one publisher heard on the socket: its identity, its Tracker,
// the resync to attach to its next delivered batch, and the topic of its
// last live batch (for traces).
type stream struct {
	id      messages.StreamID
	tracker *Tracker
	resync  messages.Resync
	topic   []byte
	// dropped: a Drop emptied the stream's state and nothing was delivered
	// since; a Resync then drops nothing more and is not counted again.
	dropped bool
	// pod, received, delivered, resyncs and reasons: a stream of a socket
	// shared by topic (topicStreams), its batches received and delivered,
	// the times its state was dropped and its resyncs by reason.
	pod                          string
	received, delivered, resyncs uint64
	reasons                      map[string]uint64
}

// Actor is one engine endpoint's listener (or, with TopicIdentity, one
// bound socket that many engines dial).
type Actor struct {
	cfg     Config
	adapter engine.Adapter
	main    *stream // the configured stream
	// connected: the socket is subscribed (Stats.Connected).
	connected bool
	topics    topicStreams // TopicIdentity: one stream per topic pod
	// liveCredits and replayCredits bound what the subscription and the
	// replay goroutine hand over (the window each); window accounts for
	// the credits taken and the batches in flight.
	liveCredits, replayCredits *credits
	window                     window
	cancel                     context.CancelFunc
	ctx                        context.Context

	replays    replayRuns
	recovery   recoveryBudget
	replaySpan replaySpan
	rebuild    rebuildState
	stats      Stats
	log        *slog.Logger
}

// Props returns the listener's props; cfg is validated first.
func Props(cfg Config) (*actor.Props, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	adapter, _ := engine.Choose(cfg.Engine)
	// Only the first incarnation resumes: a restarted listener starts
	// afresh (the index is past the loaded position by then).
	var resume atomic.Pointer[messages.Position]
	resume.Store(cfg.Resume)
	return actor.PropsFromProducer(func() actor.Actor {
		a := &Actor{
			cfg:           cfg,
			adapter:       adapter,
			liveCredits:   newCredits(cfg.Window),
			replayCredits: newCredits(cfg.Window),
			stats: Stats{BadFrames: map[string]uint64{}, Resyncs: map[string]uint64{},
				Replays: map[string]uint64{}},
		}
		a.main = a.newStream(cfg.Stream, cfg.ReplayEndpoint != "")
		pods := cfg.Pods
		if cfg.CurrentPods != nil {
			pods = cfg.CurrentPods()
		}
		a.topics = newTopicStreams(cfg.MaxStreams, cfg.Stream.DpRank, cfg.KnownPodsOnly, pods,
			func(id messages.StreamID) *stream { return a.newStream(id, false) })
		if pos := resume.Swap(nil); pos != nil {
			a.main.tracker.Resume(pos.Seq, pos.Exact)
		}
		return a
	}, mailbox.Counted(mailbox.Listener)), nil
}

func (a *Actor) newStream(id messages.StreamID, replay bool) *stream {
	return &stream{id: id, reasons: map[string]uint64{}, tracker: NewTracker(TrackerConfig{
		Replay:          replay,
		SeqStartsAtZero: a.adapter.Stream().SeqStartsAtZero,
		DetectSeqStart:  a.adapter.Stream().SeqStartDetected,
	})}
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case subscribed:
		a.stats.Subscribed++
		a.connected = true
		if a.stats.Subscribed == 1 {
			a.do(ctx, a.main, a.main.tracker.Start())
		} else {
			a.do(ctx, a.main, a.main.tracker.Resubscribed())
		}
	case socketError:
		a.connected = false
		a.stats.BadFrames["socket: "+m.err]++
		a.do(ctx, a.main, a.main.tracker.Disconnected())
		// Every engine on a shared socket lost its connection with it.
		for _, st := range a.topics.sorted() {
			a.do(ctx, st, st.tracker.Disconnected())
		}
	case liveBatch:
		a.stats.Received++
		a.window.took(true)
		if st := a.streamOf(m.topic); st != nil {
			st.topic = m.topic
			st.received++
			a.do(ctx, st, st.tracker.Live(m.seq, m.payload))
		} else {
			a.settle() // dropped: its credit goes back
		}
	case replayBatch:
		a.window.took(false)
		if a.replays.current(m.gen) {
			a.do(ctx, a.main, a.main.tracker.Replayed(m.seq, m.payload))
		} else {
			a.settle() // a batch of an abandoned replay: its credit goes back
		}
	case replayDone:
		if !a.replays.current(m.gen) {
			return
		}
		result := replayResult(m)
		a.stats.Replays[result]++
		a.replaySpan.end(result, m.err)
		if m.err != "" {
			a.log.Warn("replay failed", "endpoint", a.cfg.ReplayEndpoint, "err", m.err)
		}
		if result == "ok" {
			a.do(ctx, a.main, a.main.tracker.ReplayEnd())
		} else {
			a.do(ctx, a.main, a.main.tracker.ReplayTimeout())
		}
	case badFrame:
		a.stats.BadFrames[m.why]++
	case *messages.Applied:
		acked := a.window.acked(m.Count)
		a.settle()
		a.rebuildProgress(ctx, acked)
		if m.Lost {
			a.recover(ctx, m.Seq)
		}
	case *Rebuild:
		a.startRebuild(ctx, m)
	case *AddPod:
		a.addPod(ctx, m)
	case *ForgetPod:
		a.forgetPod(ctx, m)
	case *StatsRequest:
		if m.Pod != "" {
			ctx.Respond(a.podStats(m.Pod))
			return
		}
		s := a.stats
		s.InFlight, s.Replaying, s.Connected = a.window.inFlight(), a.main.tracker.Replaying(), a.connected
		s.NextSeq, _ = a.main.tracker.Next()
		s.Gaps = a.main.tracker.Gaps()
		s.BadFrames, s.Resyncs, s.Replays = copyMap(s.BadFrames), copyMap(s.Resyncs), copyMap(s.Replays)
		if a.cfg.TopicIdentity {
			s.Topics = a.topics.topicStats()
			s.Streams = make(map[messages.StreamID]uint64, len(s.Topics))
			for _, ts := range s.Topics {
				s.Streams[ts.Stream] = ts.NextSeq
				s.Gaps += ts.Gaps
			}
		}
		ctx.Respond(&s)
	case *actor.Stopping, *actor.Restarting:
		// The sockets' goroutines end with the incarnation that started
		// them; a restarted listener starts afresh (and its first batch
		// resyncs the stream).
		a.cancel()
		a.replaySpan.end("abandoned", "")
		a.answerRebuilds(ctx, false)
	}
}

func (a *Actor) start(ctx actor.Context) {
	a.log = ctx.Logger().With("endpoint", a.cfg.Endpoint, "dp_rank", a.cfg.Stream.DpRank)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	self, root := ctx.Self(), ctx.ActorSystem().Root
	send := func(m any) { root.Send(self, m) }
	go subscribe(a.ctx, a.cfg, a.liveCredits, send)
}

// do carries out a stream's tracker actions in order.
func (a *Actor) do(ctx actor.Context, st *stream, acts []Action) {
	for _, act := range acts {
		switch act.Kind {
		case Resync:
			if !st.dropped {
				a.countResync(st, act.Reason)
				if !act.Exact && !act.Keep {
					st.resyncs++
				}
			}
			if act.Reason == ResyncRestart {
				a.recovery.restarted()
			}
			st.resync = messages.Resync{Reason: act.Reason.String(), Exact: act.Exact, Keep: act.Keep}
			if st == a.main {
				a.rebuildResync(act.Exact)
			}
			if !act.Exact && !act.Keep && !st.dropped {
				a.log.Warn("stream degraded: index state dropped", "worker", st.id.Worker, "reason", act.Reason.String())
			}
		case RequestReplay:
			a.startReplay(ctx, act.Seq)
		case Deliver:
			a.deliver(ctx, st, act.Seq, act.Payload, act.Live)
			st.dropped = false
		case Drop:
			st.dropped = true
			st.resyncs++
			a.countResync(st, act.Reason)
			a.log.Warn("stream degraded: index state dropped", "worker", st.id.Worker, "reason", act.Reason.String())
			st.resync = messages.Resync{Reason: act.Reason.String()}
			a.deliver(ctx, st, act.Seq, nil, false)
		}
	}
	a.settle()
	if st == a.main && !st.tracker.Replaying() && a.replays.abandon() {
		a.replaySpan.end("abandoned", "")
	}
	if st == a.main {
		a.rebuildProgress(ctx, 0)
	}
}

// recover rebuilds the main stream from the replay buffer after the
// pipeline could not apply batch seq (Tracker.Recover) — once per lost
// batch: a batch lost again when the recovery delivers it, or a loss past
// the rate bound, leaves the stream degraded.
func (a *Actor) recover(ctx actor.Context, seq uint64) {
	if a.cfg.TopicIdentity || a.cfg.ReplayEndpoint == "" {
		return
	}
	if next, _ := a.main.tracker.Next(); !a.recovery.allow(time.Now(), seq, next) {
		return
	}
	a.stats.Recoveries++
	a.log.Warn("a batch could not be applied: rebuilding the stream from the replay buffer", "worker", a.main.id.Worker, "seq", seq)
	a.do(ctx, a.main, a.main.tracker.Recover())
}

func (a *Actor) startReplay(ctx actor.Context, from uint64) {
	a.replaySpan.end("abandoned", "")
	a.replaySpan = startReplaySpan(a.main.id, from)
	rctx, cancel := context.WithCancel(a.ctx)
	gen := a.replays.start(cancel)
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go replay(rctx, a.cfg, a.replayCredits, a.adapter, gen, from, func(m any) { root.Send(self, m) })
}

func (a *Actor) deliver(ctx actor.Context, st *stream, seq uint64, payload []byte, live bool) {
	sp := batchSpan(st, seq, payload)
	ctx.Send(a.cfg.Next, &messages.EngineBatch{
		Stream:     st.id,
		Engine:     a.cfg.Engine,
		BlockSize:  a.cfg.BlockSize,
		Seq:        seq,
		Payload:    payload,
		Resync:     st.resync,
		ReceivedAt: time.Now().UnixNano(),
		Listener:   ctx.Self(),
		Trace:      sp.Context(),
	})
	sp.End()
	st.resync = messages.Resync{}
	st.delivered++
	a.stats.Delivered++
	a.window.delivered(live)
}

// settle gives back the credits of batches the listener is done with
// (window.settle).
func (a *Actor) settle() {
	live, replay := a.window.settle(a.main.tracker.Held())
	a.liveCredits.give(live)
	a.replayCredits.give(replay)
}

func copyMap(m map[string]uint64) map[string]uint64 {
	c := make(map[string]uint64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
