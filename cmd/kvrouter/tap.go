package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/engine"
)

const tapHelp = `Usage: kvrouter tap [flags]

Runs kvrouter's ingest pipeline — a listener per engine endpoint, the
normalizer pool, the session coalescers and the index — and prints, every
--status, each stream's state (exact / degraded), its position, the blocks
the index holds, resyncs and replays. With --publish-router-events the
applied RouterEvents are republished on a ZeroMQ PUB (Dynamo-compatible
msgpack, one event per [topic, seq, payload] message).

Engines come from --worker flags, or — by default — kvrouter starts --sim
simulated engines in-process on loopback and drives them with a Mooncake
trace (--trace) or random prompts, then checks at the end that the index
equals every engine's cache.

--worker ID[:RANK]=ENDPOINT[,replay=ENDPOINT][,engine={engines}][,topic=PREFIX][,bind][,by-topic][,pod=POD[=ID]]
  ENDPOINT is the engine's PUB (tcp://host:port); with bind the listener
  binds it and engines dial in; with by-topic as well, many engines share
  that socket and are told apart by their topic kv@<pod>@<model> (llm-d:
  kv@<pod IP>:<serving port>@<model>), each its own stream, at most 1024;
  its worker id is ID for each pod=POD=ID given (repeatable; pod=POD: this
  --worker's ID), else a stable hash of the pod. topic=PREFIX only filters. Repeat for every engine and
  dp rank.

Examples:
  kvrouter tap                                      # 4 simulated engines, trace-driven
  kvrouter tap --worker 1=tcp://10.0.0.5:5557,replay=tcp://10.0.0.5:5558
  kvrouter tap --worker 1=tcp://127.0.0.1:5557 --publish-router-events tcp://127.0.0.1:5600

Flags:
`

func runTap(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// The engines are the adapters registered in messages/engine.
	help := strings.ReplaceAll(tapHelp, "{engines}", strings.Join(engine.Choices(), "|"))
	fs := cli.NewFlags("kvrouter tap", help, stderr)
	var workers workerFlags
	fs.Var(&workers, "worker", "engine endpoint ID[:RANK]=ENDPOINT[,replay=EP][,engine=NAME][,bind] (repeatable)")
	blockSize := fs.Int("block-size", 16, "tokens per block for every worker (0: trust the engines)")
	publish := fs.String("publish-router-events", "", "bind a ZeroMQ PUB here and republish applied RouterEvents")
	status := fs.Duration("status", 2*time.Second, "status line interval")
	duration := fs.Duration("duration", 0, "stop after this long (0: until interrupted, or until the simulation ends)")
	sims := fs.Int("sim", 4, "simulated engines to start when no --worker is given")
	trace := fs.String("trace", defaultTrace, `Mooncake trace driving the simulated engines: `+cli.TraceRefHelp+` ("-" reads stdin, "" for random prompts)`)
	requests := fs.Int("requests", 2000, "requests to simulate in all (0: until interrupted)")
	rate := fs.Float64("rate", 2000, "simulated requests per second in all")
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stopTracing, ok := startTracing("tap", stderr)
	if !ok {
		return 2
	}
	defer stopTracing()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	p, err := pipeline.Start(system, pipeline.Config{PublishRouterEvents: *publish})
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter tap: %v\n", err)
		return 1
	}
	defer p.Stop()

	var sim *simFleet
	if len(workers) == 0 {
		sim, err = startSimFleet(*sims, *blockSize, *trace, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "kvrouter tap: %v\n", err)
			return 1
		}
		defer sim.close()
		workers = sim.listeners()
	}
	for _, w := range workers {
		w.BlockSize = *blockSize
		if w.ServingEndpoint != "" {
			fmt.Fprintf(stderr, "kvrouter tap: --worker %d: serving= is a kvrouter serve option (tap only listens)\n", w.Stream.Worker)
			return 2
		}
		if err := p.AddListener(w.Config); err != nil {
			fmt.Fprintf(stderr, "kvrouter tap: %v\n", err)
			return 2
		}
	}
	fmt.Fprintf(stdout, "kvrouter tap: %d engine endpoints\n", len(workers))
	done := make(chan error, 1)
	if sim != nil {
		go func() { done <- sim.run(ctx, *requests, *rate) }()
	}
	tick := time.NewTicker(*status)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			printStatus(stdout, p, workers)
		case err := <-done:
			if err != nil {
				fmt.Fprintf(stderr, "kvrouter tap: simulation: %v\n", err)
				return 1
			}
			return sim.verify(stdout, p)
		case <-ctx.Done():
			printStatus(stdout, p, workers)
			return 0
		}
	}
}

// printStatus prints one line per stream.
func printStatus(w io.Writer, p *pipeline.Pipeline, workers workerFlags) {
	snap, err := p.Snapshot(time.Second)
	if err != nil {
		fmt.Fprintf(w, "status: index busy: %v\n", err)
		return
	}
	st, err := p.Status(time.Second)
	if err != nil {
		fmt.Fprintf(w, "status: %v\n", err)
		return
	}
	for _, cfg := range workers {
		ls, err := p.ListenerStats(cfg.Stream, time.Second)
		if err != nil {
			continue
		}
		blocks := 0
		for k, b := range snap.Blocks {
			if k.Worker == cfg.Stream.Worker {
				blocks += len(b)
			}
		}
		if cfg.TopicIdentity {
			writeSharedStatus(w, cfg.Endpoint, ls, func(s messages.StreamID) any { return st.Streams[s].State }, func(id messages.WorkerID) int {
				n := 0
				for k, b := range snap.Blocks {
					if k.Worker == id {
						n += len(b)
					}
				}
				return n
			})
			continue
		}
		s := st.Streams[cfg.Stream]
		fmt.Fprintf(w, "worker %d rank %d: %-8s seq %-7d batches %-7d blocks %-6d resyncs %v replays %v\n",
			cfg.Stream.Worker, cfg.Stream.DpRank, s.State, ls.NextSeq, ls.Delivered, blocks, ls.Resyncs, ls.Replays)
	}
}

// writeSharedStatus writes a socket shared by topic: its refusals, then
// one line per pod heard (listener.Stats.Topics), with its stream's state
// and index blocks.
func writeSharedStatus(w io.Writer, endpoint string, ls *listener.Stats, state func(messages.StreamID) any, blocks func(messages.WorkerID) int) {
	fmt.Fprintf(w, "shared socket %s: %d pods, refused: topic_identity %d, too_many_streams %d, topic_worker_collision %d\n",
		endpoint, len(ls.Topics), ls.BadFrames["topic_identity"], ls.BadFrames["too_many_streams"], ls.BadFrames["topic_worker_collision"])
	for _, t := range ls.Topics {
		fmt.Fprintf(w, "  pod %s: worker %d rank %d: %-8v seq %-7d batches %-7d blocks %-6d gaps %d resyncs %d\n",
			t.Pod, t.Stream.Worker, t.Stream.DpRank, state(t.Stream), t.NextSeq, t.Received, blocks(t.Stream.Worker), t.Gaps, t.Resyncs)
	}
}

// simFleet is tap's built-in simulated engines.
type simFleet struct {
	engines []*simengine.Engine
	driver  simengine.Driver
}

func startSimFleet(n, blockSize int, trace string, stdin io.Reader) (*simFleet, error) {
	if n <= 0 {
		return nil, errors.New("--sim must be at least 1 when no --worker is given")
	}
	f := &simFleet{}
	for i := 0; i < n; i++ {
		eng, err := simengine.New(simengine.Options{
			Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
			BlockSize: blockSize, CapacityBlocks: 4096,
		})
		if err != nil {
			f.close()
			return nil, err
		}
		f.engines = append(f.engines, eng)
	}
	var err error
	if trace == "" {
		f.driver, err = simengine.NewRandomDriver(simengine.RandomConfig{Seed: 1, BlockSize: blockSize, Sessions: true})
	} else {
		f.driver, err = openTrace(trace, stdin, simengine.TraceConfig{TokensPerBlock: blockSize})
	}
	if err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

func (f *simFleet) listeners() workerFlags {
	var ws workerFlags
	for i, e := range f.engines {
		cfg, _ := parseWorker(fmt.Sprintf("%d=%s,replay=%s", i+1, e.Endpoint(), e.ReplayEndpoint()))
		ws = append(ws, cfg)
	}
	return ws
}

// run sends requests to the engines round-robin at rate per second.
func (f *simFleet) run(ctx context.Context, requests int, rate float64) error {
	var every time.Duration
	if rate > 0 {
		every = time.Duration(float64(time.Second) / rate)
	}
	next := time.Now()
	for i := 0; requests == 0 || i < requests; i++ {
		p, err := f.driver.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if _, err := f.engines[i%len(f.engines)].ServeRequest(simengine.Request{Tokens: p.Tokens, SessionID: p.SessionID}); err != nil {
			return err
		}
		if every > 0 {
			next = next.Add(every)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Until(next)):
			}
		}
	}
	for _, e := range f.engines {
		if err := e.Publish(); err != nil { // a last heartbeat reveals a trailing loss
			return err
		}
	}
	return nil
}

// verify waits for the pipeline to catch up and compares the index with
// every engine's cache.
func (f *simFleet) verify(w io.Writer, p *pipeline.Pipeline) int {
	deadline := time.Now().Add(10 * time.Second)
	for i, e := range f.engines {
		stream := messages.StreamID{Worker: messages.WorkerID(i + 1)}
		for {
			ls, err := p.ListenerStats(stream, time.Second)
			if err == nil && ls.NextSeq == e.Stats().NextSeq && !ls.Recovering() && ls.InFlight == 0 {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(w, "worker %d did not catch up: %+v\n", i+1, ls)
				return 1
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	snap, err := p.Snapshot(time.Second)
	if err != nil {
		fmt.Fprintf(w, "index: %v\n", err)
		return 1
	}
	bad := 0
	for i, e := range f.engines {
		truth := e.Contents().Held()
		got := snap.Blocks[messages.WorkerKey{Worker: messages.WorkerID(i + 1)}]
		st := e.Stats()
		match := "equals the engine's cache"
		if !slices.Equal(got, truth) {
			match = "DIFFERS from the engine's cache"
			bad++
		}
		fmt.Fprintf(w, "worker %d: %d requests, %d batches, hit %d of %d prompt blocks; index holds %d blocks: %s\n",
			i+1, st.Cache.Requests, st.Published, st.Cache.HitBlocks, st.Cache.PromptBlocks, len(got), match)
	}
	if bad > 0 {
		return 1
	}
	fmt.Fprintf(w, "kvrouter tap: the index equals every engine's cache (%d events applied, %d blocks)\n", snap.Stats.Events, snap.Size.Blocks)
	return 0
}

func (f *simFleet) close() {
	for _, e := range f.engines {
		e.Close()
	}
}
