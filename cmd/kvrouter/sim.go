package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/bench/traces"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

const simHelp = `Usage: kvrouter sim [flags]

Runs a simulated vLLM/SGLang engine worker: it serves generated prompts on a
finite prefix cache with LRU eviction and publishes the resulting KV events
(BlockStored, BlockRemoved, AllBlocksCleared) exactly as an engine does: a
ZeroMQ PUB socket sending [topic, seq (8-byte big-endian), msgpack batch],
and a replay ROUTER answering ["", start_seq] requests from a DEALER.

Prompts come from a driver:
  random   a seeded pool of shared prefixes with random unshared tails
  trace    a Mooncake JSONL trace (--trace: builtin:conversation, the
           default, builtin:synthetic, a file path, or "-" for stdin); each
           hash_id expands to --tokens-per-block deterministic tokens, so
           equal ids share cache blocks

Pacing: --rate requests per second; with --rate 0 a trace follows its own
timestamps and the random driver runs flat out. --block-rate paces by
stored blocks instead (a steady ingest whatever the hit rate). The run ends
after --requests prompts, at the end of the trace (unless --hold or --loop:
start the trace again, same tokens), or on SIGINT/SIGTERM. A status line goes to stderr every --status.

Replay publisher: --pre-encode N first serves the driver's prompts on a
cache like the engine's, without publishing, and encodes each batch they
cause until N stored blocks are encoded (then an AllBlocksCleared batch);
then it publishes those batches in a loop — the same frames, each with the
next seq, kept for replay — paced by --block-rate (0: flat out). Sending
costs a ZeroMQ send per batch and nothing per block, so one core offers a
router far more blocks/s than the engine that hashes, caches and encodes
as it goes. --hwm bounds the PUB queue as libzmq's does (vLLM: 100000).

Like vLLM, a --dp-rank r > 0 adds r to both endpoint ports.

OpenAI and metrics surface: --http HOST:PORT serves POST /v1/completions
and /v1/chat/completions from the same cache (usage.prompt_tokens_details
.cached_tokens says how much of the prompt it held) and GET /metrics in the
format --metrics names (vllm: current vLLM names; vllm-0.8: the names before
0.9's renames; sglang: the sglang: prefix; sglang-0.5.4: the sglang_
prefix), from the engine's own queue, running set and KV occupancy;
--max-running bounds the running set (more requests wait, and /metrics says
so). --driver none serves HTTP requests only, until interrupted.

` + simFleetHelp + `
Examples:
  kvrouter sim                                    # vllm-map on :5557, replay on :5558
  kvrouter sim --encoding sglang --capacity 512 --rate 50
  kvrouter sim --driver trace --tokens-per-block 16 --requests 1000
  kvrouter sim --driver trace --trace ./my_trace.jsonl --rate 0
  kvrouter sim --driver none --http 127.0.0.1:8000 --metrics sglang --max-running 8
  kvrouter decode --hex ...                       # inspect a payload you captured

Flags:
`

func runSim(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlags("kvrouter sim", simHelp, stderr)
	endpoint := fs.String("endpoint", "tcp://127.0.0.1:5557", "PUB address to bind (port 0 picks a free one)")
	connect := fs.Bool("connect", false, "dial --endpoint instead of binding (for a router whose SUB binds)")
	replayEP := fs.String("replay-endpoint", "tcp://127.0.0.1:5558", `replay ROUTER address to bind; "" disables replay`)
	legacyReplay := fs.Bool("legacy-replay", false, `answer replays in the older 3-frame layout ["", seq, payload]`)
	encoding := fs.String("encoding", string(simengine.EncodingVLLMMap), "event encoding: "+joinEncodings())
	blockSize := fs.Int("block-size", 16, "tokens per cache block")
	capacity := fs.Int("capacity", 8192, "cache capacity in blocks (LRU eviction past it)")
	dpRank := fs.Uint("dp-rank", 0, "data-parallel rank (sent in every batch; offsets the ports)")
	topic := fs.String("topic", "", "topic frame, e.g. kv@pod-1@model")
	seqStart := fs.Uint64("seq-start", 0, "first sequence number")
	hashSeed := fs.Uint64("hash-seed", 0, "engine block-hash seed (like PYTHONHASHSEED)")
	driver := fs.String("driver", "random", "prompt source: random, trace, or none (HTTP requests only: with --http)")
	httpAddr := fs.String("http", "", "serve the OpenAI completions surface and GET /metrics on HOST:PORT (off when not given)")
	metricsFmt := fs.String("metrics", simengine.MetricsVLLM, "with --http: /metrics format: "+strings.Join(simengine.MetricsDialects, ", "))
	maxRunning := fs.Int("max-running", 0, "with --http: requests running at once at most; more wait (0: no bound)")
	completion := fs.Int("completion-tokens", 16, "with --http: tokens per answer (a request's max_tokens lowers it)")
	tokenInterval := fs.Duration("token-interval", 10*time.Millisecond, "with --http: pause between streamed tokens")
	tracePath := fs.String("trace", defaultTrace, `Mooncake trace for --driver trace: `+cli.TraceRefHelp+` ("-" reads stdin)`)
	tokensPerBlock := fs.Int("tokens-per-block", simengine.MooncakeBlockTokens, "tokens each trace hash_id expands to")
	rate := fs.Float64("rate", 10, "requests per second (0: trace timestamps, or flat out for random)")
	blockRate := fs.Float64("block-rate", 0, "stored blocks per second: pace by the blocks each prompt stores (overrides --rate; 0: off)")
	skip := fs.Int("skip", 0, "--driver trace: start this many prompts into the trace (with --loop they come back in the next pass), so engines on one trace hold different slices")
	loop := fs.Bool("loop", false, "--driver trace: read the trace into memory first, then replay it in a loop (same tokens) until --requests or interrupted")
	requests := fs.Int("requests", 0, "stop after this many requests (0: until interrupted or the trace ends)")
	seed := fs.Uint64("seed", 1, "seed for generated prompts and trace tokens")
	sessions := fs.Bool("sessions", false, "random driver: report a session_id per shared prefix")
	heartbeat := fs.Duration("heartbeat", 0, "publish an empty batch this often (0: never, as vLLM)")
	status := fs.Duration("status", 5*time.Second, "status line interval")
	holdOn := fs.Bool("hold", false, "keep publishing heartbeats and serving replay after the driver ends, until interrupted")
	preEncode := fs.Int("pre-encode", 0, "replay publisher: encode batches holding this many stored blocks first, then publish them in a loop (0: off)")
	disaggFleet := fs.String("disagg-fleet", "", "P:D: run a disaggregated fleet of P prefill and D decode engines in this process (see above); prints its workers file")
	disaggProto := fs.String("disagg-protocol", "vllm", "with --disagg-fleet: the transfer protocol (vllm, sglang, trtllm)")
	fleetHost := fs.String("fleet-host", "127.0.0.1", "with --disagg-fleet: the host the fleet's engines listen on (free ports)")
	fleetModel := fs.String("model", "sim", "with --disagg-fleet: the model name of the fleet's registrations and answers")
	hwm := fs.Int("hwm", 0, "PUB high-water mark in messages: past it new batches are dropped, as libzmq's PUB does (0: zmq4's unbounded queue; vLLM sets 100000)")
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "kvrouter sim: "+format+"\n", a...)
		return code
	}
	if *dpRank > 1<<16 || *requests < 0 || *rate < 0 || *blockRate < 0 || *status <= 0 || *heartbeat < 0 || *preEncode < 0 || *hwm < 0 {
		return fail(2, "--dp-rank, --requests, --rate, --block-rate, --status, --heartbeat, --pre-encode or --hwm out of range")
	}
	if *preEncode > 0 && (*requests != 0 || *holdOn) {
		return fail(2, "--pre-encode publishes until interrupted: not with --requests or --hold")
	}
	if (*loop || *skip != 0) && *driver != "trace" || *skip < 0 {
		return fail(2, "--loop and --skip need --driver trace; --skip must not be negative")
	}
	enc, err := simengine.ParseEncoding(*encoding)
	if err != nil {
		return fail(2, "%v", err)
	}
	if *disaggFleet != "" {
		return simFleetMain(fs, pdFleet{protocol: *disaggProto, host: *fleetHost, model: *fleetModel, blockSize: *blockSize,
			capacity: *capacity, completion: *completion, tokenInterval: *tokenInterval}, *disaggFleet, enc, stdout, fail)
	}
	rank := uint32(*dpRank)
	pubEP, err := simengine.OffsetEndpoint(*endpoint, rank)
	if err != nil {
		return fail(2, "%v", err)
	}
	replay, err := simengine.OffsetEndpoint(*replayEP, rank)
	if err != nil {
		return fail(2, "%v", err)
	}

	var drv simengine.Driver
	switch *driver {
	case "random":
		drv, err = simengine.NewRandomDriver(simengine.RandomConfig{Seed: *seed, BlockSize: *blockSize, Sessions: *sessions})
	case "none":
		if *httpAddr == "" {
			return fail(2, "--driver none needs --http")
		}
	case "trace":
		drv, err = openTrace(*tracePath, stdin, simengine.TraceConfig{TokensPerBlock: *tokensPerBlock, Limit: *requests, Seed: *seed})
		if *loop && err == nil {
			src := drv.(*simengine.TraceDriver)
			drv, err = simengine.Loop(src)
			src.Close()
		}
		for i := 0; i < *skip && err == nil; i++ {
			_, err = drv.Next()
		}
	default:
		return fail(2, "unknown --driver %q (random, trace or none)", *driver)
	}
	if err != nil {
		return fail(2, "%v", err)
	}
	if c, ok := drv.(io.Closer); ok {
		defer c.Close()
	}

	eng, err := simengine.New(simengine.Options{
		Endpoint: pubEP, Connect: *connect, ReplayEndpoint: replay, LegacyReplay: *legacyReplay,
		Topic: *topic, SeqStart: *seqStart, DpRank: rank, BlockSize: *blockSize, CapacityBlocks: *capacity,
		HashSeed: *hashSeed, Encoding: enc, Linger: 200 * time.Millisecond, HWM: *hwm,
	})
	if err != nil {
		return fail(1, "%v", err)
	}
	defer eng.Close()
	replayNote := "replay off"
	if eng.ReplayEndpoint() != "" {
		replayNote = "replay on " + eng.ReplayEndpoint()
	}
	fmt.Fprintf(stderr, "kvrouter sim: %s on %s (%s), topic %q, dp rank %d, %d-token blocks, capacity %d, driver %s\n",
		enc, eng.Endpoint(), replayNote, *topic, rank, *blockSize, *capacity, *driver)

	if *httpAddr != "" {
		srv, err := eng.ServeHTTP(*httpAddr, simengine.HTTPOptions{CompletionTokens: *completion, TokenInterval: *tokenInterval,
			Metrics: *metricsFmt, MaxRunning: *maxRunning})
		if err != nil {
			return fail(2, "%v", err)
		}
		defer srv.Close()
		fmt.Fprintf(stderr, "kvrouter sim: OpenAI and %s metrics on http://%s\n", *metricsFmt, srv.ServingEndpoint())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	report := func(s simengine.Stats) { fmt.Fprintln(stderr, statusLine(s, time.Since(started))) }
	if drv == nil { // --driver none
		holdEngine(ctx, eng, *heartbeat, *status, report)
		return 0
	}
	run := simengine.RunConfig{Driver: drv, Rate: *rate, BlockRate: *blockRate, Requests: *requests,
		Heartbeat: *heartbeat, Status: report, StatusEvery: *status}
	if *preEncode > 0 {
		err = runRecorded(ctx, eng, *preEncode, run, stderr)
	} else {
		err = eng.Run(ctx, run)
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	if *holdOn && ctx.Err() == nil {
		fmt.Fprintln(stderr, "kvrouter sim: driver done; holding until interrupted")
		holdEngine(ctx, eng, *heartbeat, *status, report)
	}
	if err := eng.Close(); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

// runRecorded is --pre-encode: record blocks stored blocks of the driver's
// prompts, then publish the recording in a loop until ctx ends.
func runRecorded(ctx context.Context, eng *simengine.Engine, blocks int, run simengine.RunConfig, stderr io.Writer) error {
	t0 := time.Now()
	rec, err := eng.Record(run.Driver, blocks)
	if err != nil {
		return err
	}
	bytes := 0
	for _, p := range rec.Payloads {
		bytes += len(p)
	}
	fmt.Fprintf(stderr, "kvrouter sim: pre-encoded %d batches (%d stored blocks, %d prompts, %.1f MB) in %s; publishing them in a loop\n",
		len(rec.Payloads), rec.Blocks, rec.Requests, float64(bytes)/1e6, time.Since(t0).Round(time.Millisecond))
	return eng.RunRecording(ctx, rec, run)
}

// holdEngine keeps the engine up (replay, heartbeats, status) until ctx ends.
func holdEngine(ctx context.Context, eng *simengine.Engine, heartbeat, status time.Duration, report func(simengine.Stats)) {
	st := time.NewTicker(status)
	defer st.Stop()
	var beat <-chan time.Time
	if heartbeat > 0 {
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		beat = t.C
	}
	for {
		select {
		case <-ctx.Done():
			report(eng.Stats())
			return
		case <-st.C:
			report(eng.Stats())
		case <-beat:
			_ = eng.Publish() // counted in Stats.PublishErrors
		}
	}
}

// defaultTrace is every --trace flag's default: the embedded Mooncake
// conversation trace.
const defaultTrace = traces.BuiltinPrefix + traces.Conversation

// openTrace opens trace reference path (traces.OpenRef), or reads stdin
// for "-".
func openTrace(path string, stdin io.Reader, cfg simengine.TraceConfig) (simengine.Driver, error) {
	switch path {
	case "":
		return nil, errors.New("--driver trace needs --trace (" + cli.TraceRefHelp + ")")
	case "-":
		return simengine.NewTraceDriver(stdin, cfg)
	}
	return simengine.OpenTrace(path, cfg)
}

// statusLine is the periodic one-line summary.
func statusLine(s simengine.Stats, up time.Duration) string {
	hit := 0.0
	if s.Cache.PromptBlocks > 0 {
		hit = 100 * float64(s.Cache.HitBlocks) / float64(s.Cache.PromptBlocks)
	}
	return fmt.Sprintf("kvrouter sim: up %s next_seq=%d published=%d dropped=%d requests=%d hit=%.1f%% blocks=%d/%d stored=%d evicted=%d sent=%d replays=%d errors=%d",
		up.Round(100*time.Millisecond), s.NextSeq, s.Published, s.Dropped, s.Cache.Requests, hit,
		s.Blocks, s.CapacityBlocks, s.Cache.StoredBlocks, s.Cache.EvictedBlocks, s.SentBlocks, s.ReplayRequests, s.PublishErrors)
}

func joinEncodings() string {
	names := make([]string, 0, 3)
	for _, e := range simengine.Encodings() {
		names = append(names, string(e))
	}
	return strings.Join(names, ", ")
}
