package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
)

// Trial is the outcome of one trial.
type Trial struct {
	Plan Plan
	// Streams holds the checker's verdict per stream (empty when Err is set).
	Streams []StreamReport
	// Err says why the trial could not run or settle.
	Err error
	// Truths and Observed are what the checker compared (for re-checks).
	Truths   []Truth
	Observed Observed
	// Hops, Listeners and Normalizers hold each engine's hop, listener and
	// normalizer counters.
	Hops        []HopStats
	Listeners   []listener.Stats
	Normalizers []normalizer.PoolStats
	Elapsed     time.Duration
}

// Failed reports whether the trial broke a rule or did not settle.
func (t Trial) Failed() bool {
	return t.Err != nil || slices.ContainsFunc(t.Streams, func(r StreamReport) bool { return !r.OK() })
}

// engineRun is one engine of a running trial.
type engineRun struct {
	plan     EnginePlan
	eng      *simengine.Engine
	hop      *Hop
	drv      *simengine.RandomDriver
	stream   messages.StreamID
	restarts map[int]FaultKind
	// emptyAt is the seq from which the replay buffer must hold every batch
	// for the router to know the whole cache: the batch after which it was
	// last empty (start, wiping restart, clear). kept: a RestartKeep found
	// blocks in the cache since then; their history is gone.
	emptyAt uint64
	kept    bool
}

// The simulated workload: small blocks and a small cache, so prompts share
// prefixes and evict each other within a few dozen batches.
const (
	blockSize      = 4
	capacityBlocks = 24
)

// RunTrial runs the trial of one seed: RunPlan of NewPlan(seed, cfg.Plan).
func RunTrial(ctx context.Context, cfg Config, seed uint64) Trial {
	return RunPlan(ctx, cfg, NewPlan(seed, cfg.Plan))
}

// RunPlan runs one trial: it starts the plan's engines and hops and a
// pipeline, drives the prompts and the planned faults, waits until every
// stream has settled and checks the index against the engines. The seed
// picks the engines' encodings and prompts.
func RunPlan(ctx context.Context, cfg Config, plan Plan) Trial {
	cfg = cfg.withDefaults()
	start := time.Now()
	t := Trial{Plan: plan}
	seed := plan.Seed
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Logger }))
	defer system.Shutdown()
	p, err := pipeline.Start(system, pipeline.Config{})
	if err != nil {
		t.Err = err
		return t
	}
	defer p.Stop()
	var runs []*engineRun
	defer func() {
		for _, r := range runs {
			r.close()
		}
	}()
	for i, ep := range t.Plan.Engines {
		r, err := startEngine(ctx, cfg, p, seed, i, ep)
		if r != nil {
			runs = append(runs, r)
		}
		if err != nil {
			t.Err = fmt.Errorf("engine %d: %w", i, err)
			return t
		}
	}
	if err := drive(ctx, runs); err != nil {
		t.Err = err
		return t
	}
	t.Observed, t.Err = settle(ctx, cfg, p, runs)
	for _, r := range runs {
		t.Truths = append(t.Truths, r.truth())
		t.Hops = append(t.Hops, r.hop.Stats())
		if ls, err := p.ListenerStats(r.stream, time.Second); err == nil {
			t.Listeners = append(t.Listeners, *ls)
		}
		if ns, err := p.NormalizerStats(r.stream, time.Second); err == nil {
			t.Normalizers = append(t.Normalizers, *ns)
		}
	}
	if t.Err == nil {
		t.Streams = Check(t.Truths, t.Observed)
	}
	t.Elapsed = time.Since(start)
	return t
}

// startEngine starts engine i with its hop and listener, waits until its
// messages reach the pipeline, then arms the hop.
func startEngine(ctx context.Context, cfg Config, p *pipeline.Pipeline, seed uint64, i int, plan EnginePlan) (*engineRun, error) {
	enc := simengine.Encodings()[(seed+uint64(i))%uint64(len(simengine.Encodings()))]
	eng, err := simengine.New(simengine.Options{
		Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", ReplayBuffer: plan.ReplayBuffer,
		Encoding: enc, BlockSize: blockSize, CapacityBlocks: capacityBlocks,
	})
	if err != nil {
		return nil, err
	}
	r := &engineRun{plan: plan, eng: eng, stream: messages.StreamID{Worker: messages.WorkerID(i + 1)}, restarts: plan.Restarts()}
	if r.hop, err = NewHop(eng.Endpoint(), HopOptions{Faults: plan.MessageFaults()}); err != nil {
		return r, err
	}
	r.drv, err = simengine.NewRandomDriver(simengine.RandomConfig{Seed: seed*16 + uint64(i), BlockSize: blockSize,
		Prefixes: 4, MaxPrefixBlocks: 12, MaxSuffixTokens: 12, Sessions: true})
	if err != nil {
		return r, err
	}
	lc := listener.Config{Stream: r.stream, Engine: enc.Engine(), Endpoint: r.hop.Endpoint(), BlockSize: blockSize,
		ReplayTimeout: cfg.ReplayTimeout, Silence: cfg.Silence}
	if plan.Replay {
		lc.ReplayEndpoint = eng.ReplayEndpoint()
	}
	if err := p.AddListener(lc); err != nil {
		return r, err
	}
	// Heartbeat until the listener hears the engine through the hop, then
	// until the hop has seen every heartbeat: the next message the hop
	// receives is the first of the plan.
	err = until(ctx, cfg.SettleTimeout, 10*time.Millisecond, func() (bool, string) {
		if err := eng.Publish(); err != nil {
			return false, err.Error()
		}
		ls, err := p.ListenerStats(r.stream, time.Second)
		return err == nil && ls.Received > 0, fmt.Sprint("listener ", ls, err)
	})
	if err == nil {
		err = until(ctx, cfg.SettleTimeout, 5*time.Millisecond, func() (bool, string) {
			s := r.hop.Stats()
			return s.LastSeq+1 == eng.Stats().NextSeq, fmt.Sprint("hop ", s)
		})
	}
	if err != nil {
		return r, fmt.Errorf("joining: %w", err)
	}
	r.hop.Arm()
	return r, nil
}

// drive serves the prompts round robin over the engines, carrying out the
// planned restarts and cache clears before their prompt.
func drive(ctx context.Context, runs []*engineRun) error {
	prompts := 0
	for _, r := range runs {
		prompts = max(prompts, r.plan.Prompts)
	}
	for j := range prompts {
		for _, r := range runs {
			if j >= r.plan.Prompts {
				continue
			}
			if kind, ok := r.restarts[j]; ok {
				r.restart(kind)
			}
			if j > 0 && j == r.plan.ClearBefore {
				r.emptyAt, r.kept = r.eng.Stats().NextSeq, false
				if err := r.eng.Clear(); err != nil {
					return err
				}
			}
			pr, err := r.drv.Next()
			if err != nil {
				return err
			}
			if _, err := r.eng.ServeRequest(simengine.Request{Tokens: pr.Tokens, SessionID: pr.SessionID}); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond): // let the pipeline interleave with the engines
		}
	}
	return nil
}

func (r *engineRun) restart(kind FaultKind) {
	wipe := kind == RestartWipe
	r.emptyAt = 0
	if wipe {
		r.kept = false
	} else if r.eng.Stats().Blocks > 0 {
		r.kept = true
	}
	r.eng.ResetSeq(simengine.ResetOptions{ClearCache: wipe, ClearReplay: true})
}

// truth is the engine's cache and whether the router could know all of it.
func (r *engineRun) truth() Truth {
	t := Truth{Stream: r.stream, Held: r.eng.Contents().Held()}
	t.HistoryHeld = r.plan.Replay && !r.kept && r.eng.Stats().NextSeq-r.emptyAt <= uint64(r.plan.ReplayBuffer)
	return t
}

func (r *engineRun) close() {
	if r.hop != nil {
		_ = r.hop.Close()
	}
	_ = r.eng.Close()
}

// settle heartbeats every engine until each listener has delivered up to
// the engine's last seq, is connected, finished replaying and had every batch applied,
// then reads the index and the streams' states.
func settle(ctx context.Context, cfg Config, p *pipeline.Pipeline, runs []*engineRun) (Observed, error) {
	deadline := time.Now().Add(cfg.SettleTimeout)
	var last string
	for time.Now().Before(deadline) {
		for _, r := range runs {
			if err := r.eng.Publish(); err != nil {
				return Observed{}, err
			}
		}
		if until(ctx, 300*time.Millisecond, 20*time.Millisecond, func() (bool, string) { return settled(p, runs) }) == nil {
			return observe(p)
		}
		if ctx.Err() != nil {
			return Observed{}, ctx.Err()
		}
		_, last = settled(p, runs)
	}
	return Observed{}, fmt.Errorf("not settled after %v: %s", cfg.SettleTimeout, last)
}

func settled(p *pipeline.Pipeline, runs []*engineRun) (bool, string) {
	status, err := p.Status(time.Second)
	if err != nil {
		return false, err.Error()
	}
	for _, r := range runs {
		ls, err := p.ListenerStats(r.stream, time.Second)
		if err != nil {
			return false, err.Error()
		}
		next := r.eng.Stats().NextSeq
		st := status.Streams[r.stream]
		if ls.NextSeq != next || ls.Recovering() || ls.InFlight != 0 || st.LastSeq+1 != next {
			return false, fmt.Sprintf("worker %d: listener next %d (engine %d), replaying %v, connected %v, in flight %d, applied seq %d; resyncs %v replays %v",
				r.stream.Worker, ls.NextSeq, next, ls.Replaying, ls.Connected, ls.InFlight, st.LastSeq, ls.Resyncs, ls.Replays)
		}
	}
	return true, ""
}

func observe(p *pipeline.Pipeline) (Observed, error) {
	snap, err := p.Snapshot(time.Second)
	if err != nil {
		return Observed{}, err
	}
	status, err := p.Status(time.Second)
	if err != nil {
		return Observed{}, err
	}
	obs := Observed{Blocks: snap.Blocks, States: map[messages.StreamID]coalescer.StreamState{}}
	for s, st := range status.Streams {
		obs.States[s] = st.State
	}
	return obs, nil
}

// until polls cond every step until it holds (true, nil), ctx ends or
// timeout passes (false, an error with cond's last state).
func until(ctx context.Context, timeout, step time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New(state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(step):
		}
	}
}
