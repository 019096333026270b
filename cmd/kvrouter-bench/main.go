// Command kvrouter-bench measures kvrouter on Mooncake traces and runs the
// fault-injection trials: the benchmark harness, a binary of its own so the
// router binary (cmd/kvrouter) links neither the plotting library nor the
// chaos harness. Method and figures: bench/README.md.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/chaos"
	"github.com/kvrouter/kvrouter/bench/loadgen"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

const benchHelp = `Usage: kvrouter-bench [flags]

Measures kvrouter on Mooncake traces (method and latest figures in
bench/README.md). Simulated engines with finite LRU caches publish real KV
events over ZeroMQ into the real pipeline; route requests go through the
real route path, in process and over HTTP. It reports, as a table (stdout)
and optionally as JSON and PNG plots:

  ingest    stored blocks/s and events/s applied end to end, and the lag
            from an engine's publish to the block being visible in /query
  sweep     /route latency p50/p99/p99.9 at increasing offered rates (open
            loop) until saturation, while the routed requests' events are
            applied; a point is invalid if a stream resynced or degraded, a
            published batch never became visible, or the lag kept growing
  memory    router heap per (block, worker) index entry
  quality   prefix hit rate, per-worker request and prefill CoV and a TTFT
            estimate (an engine model: FIFO prefill at a fixed rate) of
            kvrouter vs its peers' policies re-implemented on the same
            caches and load (dynamo, sglang, llm-d, aibrix), random,
            round-robin, exact-greedy (exact caches, longest prefix, ignores
            load) and the clairvoyant bound (one pooled cache of the fleet's
            capacity)

The sweep's routed requests are served on their engines asynchronously
(--feed async: one queue per engine), so route latency is the router's
own; --feed inline makes each client serve what it routed, and --feed none
serves nothing (the route path alone, with no ingest competing).

--quick (the default, under two minutes on 2 cores), --full and --quality
(the routing-quality table alone) choose a preset; any other flag given
overrides the preset's value.

kvrouter-bench pinned [flags] runs the pinned, out-of-process /route load
instead: the router as its own kvrouter serve process on one core, the
engines and an open-loop generator on the other, beside a plain net/http
floor (kvrouter-bench pinned --help). kvrouter-bench pinned-ingest [flags]
measures the router's ingest the same way: kvrouter serve on one core,
replay publishers offering pre-encoded KV event batches on the other
(kvrouter-bench pinned-ingest --help).

--chaos runs the fault-injection trials of bench/chaos instead (a seeded
fault plan per trial between simulated engines and a router, then the
convergence check) and prints their report with a rerun command for each
failed trial; it exits 1 if any trial failed.

Flags:
`

// benchFlags are the flags that override a preset, by name.
type benchFlags struct {
	fs  *flag.FlagSet
	set map[string]func(*loadgen.Config) error
}

func (b *benchFlags) strFlag(name, usage string, apply func(*loadgen.Config, string) error) {
	v := b.fs.String(name, "", usage)
	b.set[name] = func(c *loadgen.Config) error { return apply(c, *v) }
}

func (b *benchFlags) intFlag(name, usage string, apply func(*loadgen.Config, int)) {
	v := b.fs.Int(name, 0, usage)
	b.set[name] = func(c *loadgen.Config) error { apply(c, *v); return nil }
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "pinned":
			return runPinned(args[1:], stdout, stderr)
		case "pinned-ingest":
			return runPinnedIngest(args[1:], stdout, stderr)
		case "floor-server":
			return runFloorServer(args[1:], stdout, stderr)
		case "disagg":
			return runDisagg(args[1:], stdout, stderr)
		}
	}
	fs := cli.NewFlags("kvrouter-bench", benchHelp, stderr)
	quick := fs.Bool("quick", true, "quick preset: 2,000 conversation requests on 4, 16, 64 workers with 1, 2, 4 index shards; 1 s sweep points on 16 workers")
	full := fs.Bool("full", false, "full preset: the Mooncake traces, gen:agentic and gen:burst in full on 4, 16, 64, 1000 workers (1 shard), with and without session ids; 3 s sweep points on 16 and 1000 workers")
	quality := fs.Bool("quality", false, "quality preset: the routing-quality table alone (kvrouter with and without predict-on-route beside every peer policy and baseline) on the full mode's traces and worker counts")
	jsonPath := fs.String("json", "", "also write the report as JSON to this `file`")
	plots := fs.String("plots", "", "also draw latency.png and hitrate-<trace>.png into this `dir`")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this `file` (go tool pprof)")
	memProfile := fs.String("memprofile", "", "write heap profiles at each memory measure, `prefix`-<workers>w-<measured|empty>-<before|after>.pb.gz, every allocation recorded (runs several times slower)")
	chaosRun := fs.Bool("chaos", false, "run the fault-injection trials (bench/chaos) instead of the load run; exit 1 if a trial fails")
	chaosTrials := fs.Int("chaos-trials", 100, "--chaos: `trials` to run; trial i has seed --chaos-seed + i")
	chaosSeed := fs.Uint64("chaos-seed", 1, "--chaos: `seed` of the first trial")
	chaosKinds := fs.String("chaos-kinds", defaultChaosKinds, "--chaos: comma-separated fault `kinds` drawn, or all (drop, duplicate, reorder, truncate, corrupt, cut, restart_wipe, restart_keep)")
	b := &benchFlags{fs: fs, set: map[string]func(*loadgen.Config) error{}}
	b.strFlag("trace", "comma-separated Mooncake `traces`, each "+cli.TraceRefHelp+" (quick: builtin:conversation; full: builtin:conversation,builtin:synthetic,gen:agentic,gen:burst — the generated agentic workload and the burst workload: sibling groups of 2–32 requests sharing a long prefix, fired within 5 ms, among multi-turn sessions)",
		func(c *loadgen.Config, v string) error { c.Traces = cli.SplitList(v); return nil })
	b.intFlag("tokens-per-block", "tokens each trace hash_id expands to, and the block size (default 16; the trace's own is 512)",
		func(c *loadgen.Config, v int) { c.TokensPerBlock = v })
	b.intFlag("requests", "requests per trace in the quality replays, 0 for all (quick: 2000)", func(c *loadgen.Config, v int) { c.Requests = v })
	b.strFlag("workers", "comma-separated worker `counts` of the quality replays (quick: 4,16,64; full: 4,16,64,1000)",
		func(c *loadgen.Config, v string) (err error) { c.Workers, err = cli.IntList(v); return err })
	b.intFlag("capacity", "cache capacity of each simulated engine, in blocks (default 8192)", func(c *loadgen.Config, v int) { c.Capacity = v })
	b.intFlag("in-flight-per-worker", "kvrouter replays on w workers: each request's load is freed this many × w requests later (default 2)",
		func(c *loadgen.Config, v int) { c.InFlightPerWorker = v })
	b.strFlag("sessions", "`on`, off or both: send each request's inferred session_id to kvrouter (quick: on; full: both)",
		func(c *loadgen.Config, v string) (err error) { c.Sessions, err = onOff("--sessions", v); return err })
	b.strFlag("shards", "comma-separated index shard `counts` (quick: 1,2,4; full: 1): a replay, ingest run and sweep per count",
		func(c *loadgen.Config, v string) (err error) { c.Shards, err = cli.IntList(v); return err })
	b.strFlag("hosts", "comma-separated router host `counts` (quick: 1; full: 1,2,3): 1 runs one router with each --shards count; n > 1 runs n cluster members on loopback in this process (8 shard grains): an ingest run, the replays and sweep per count (memory: one host only)",
		func(c *loadgen.Config, v string) (err error) { c.Hosts, err = cli.IntList(v); return err })
	b.strFlag("overlap-weight", fmt.Sprintf("comma-separated routing overlap `weights` (serve's --overlap-weight, default %g, kvrouter's cost): a kvrouter replay per weight; the sweep uses the first", routing.DefaultConfig().OverlapWeight),
		func(c *loadgen.Config, v string) (err error) {
			c.OverlapWeights, err = cli.FloatList("--overlap-weight", v)
			return err
		})
	b.strFlag("outside-load", "share of every engine's load the router under test does not route (0-0.9, default 0): requests sent straight to the engines, unevenly; replaces the quality replays by the outside-load replays (bench/README.md, \"Outside load\")",
		func(c *loadgen.Config, v string) (err error) {
			c.Outside.Fraction, err = cli.ParseFloat("--outside-load", v)
			return err
		})
	b.strFlag("temperature", "routing temperature of the kvrouter replays (serve's --temperature, default 0)",
		func(c *loadgen.Config, v string) (err error) {
			c.Temperature, err = cli.ParseFloat("--temperature", v)
			return err
		})
	b.strFlag("session-credit", "weight of a route request's session lineage (serve's --session-credit, default 1; 0: off)",
		func(c *loadgen.Config, v string) (err error) {
			c.SessionCredit, err = cli.ParseFloat("--session-credit", v)
			return err
		})
	b.intFlag("ingest-workers", "engines of the ingest phase, 0 to skip it (default 8)", func(c *loadgen.Config, v int) { c.IngestWorkers = v })
	b.intFlag("ingest-passes", "trace passes of the ingest phase, each with fresh prompts (quick: 1; full: 4)", func(c *loadgen.Config, v int) { c.IngestPasses = v })
	b.strFlag("sweep-workers", "comma-separated worker `counts` whose replay is followed by the latency sweep, on the first trace (quick: 16; full: 16,1000)",
		func(c *loadgen.Config, v string) (err error) { c.SweepWorkers, err = cli.IntList(v); return err })
	b.strFlag("rates", "comma-separated offered `rates` of the sweep, in route requests/s; it stops at the first saturated one",
		func(c *loadgen.Config, v string) (err error) { c.Rates, err = cli.FloatList("--rates", v); return err })
	b.strFlag("point-duration", "how long each sweep point offers its rate (quick: 1s; full: 3s)",
		func(c *loadgen.Config, v string) (err error) {
			c.PointDuration, err = time.ParseDuration(v)
			return err
		})
	b.intFlag("clients", "concurrent clients (and HTTP connections) of the sweep (default 64)", func(c *loadgen.Config, v int) { c.Clients = v })
	b.strFlag("transports", "comma-separated sweep `transports`: in-process, http (default both)",
		func(c *loadgen.Config, v string) error { c.Transports = cli.SplitList(v); return nil })
	b.strFlag("feed", "how the sweep's routed requests reach the engines: `async` (each engine's own goroutine and queue; the default), inline (the routing client serves) or none (route only: no events while sweeping)",
		func(c *loadgen.Config, v string) error { c.Feed = v; return nil })
	b.strFlag("event-delay", "when a served request's KV events reach kvrouter and the event-fed peers: `prefill` (the engine model's prefill end + --publish-interval; the default) or none (before the next request: the old zero-delay replay)",
		func(c *loadgen.Config, v string) error { c.Delay.Mode = v; return nil })
	b.strFlag("publish-interval", fmt.Sprintf("--event-delay prefill: the engine's publish interval added to the prefill end (default %v)", loadgen.DefaultPublishInterval),
		func(c *loadgen.Config, v string) (err error) {
			c.Delay.PublishInterval, err = time.ParseDuration(v)
			return err
		})
	b.strFlag("predict", "`on`, off or both: kvrouter replays with predict-on-route (serve's default) and/or without (--predict-ttl 0) (quality: both; else on)",
		func(c *loadgen.Config, v string) (err error) { c.Predict, err = onOff("--predict", v); return err })
	b.intFlag("seed", "seed of the seeded baselines: random, exact-greedy, llm-d and aibrix ties (default 1)", func(c *loadgen.Config, v int) { c.Seed = uint64(v) })
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "kvrouter-bench: %v\n", err); return 1 }
	if *chaosRun {
		return runChaos(*chaosTrials, *chaosSeed, *chaosKinds, stdout, stderr)
	}
	cfg := loadgen.QuickConfig()
	switch {
	case *quality:
		cfg = loadgen.QualityConfig()
	case *full:
		cfg = loadgen.FullConfig()
	case !*quick:
		return fail(fmt.Errorf("--quick=false needs --full"))
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if apply, ok := b.set[f.Name]; ok && err == nil {
			err = apply(&cfg)
		}
	})
	if err != nil {
		return fail(err)
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if *memProfile != "" {
		// Every allocation, so that a profile's sites add up to the heap
		// the memory measure reads (sampled, small sites go missing).
		runtime.MemProfileRate = 1
		cfg.MemProfile = *memProfile
	}
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return fail(err)
		}
		defer stopProfile()
	}
	rep, err := loadgen.Run(cfg)
	if err != nil {
		return fail(err)
	}
	if err := rep.WriteTable(stdout); err != nil {
		return fail(err)
	}
	if *jsonPath != "" {
		if err := writeJSONReport(rep, *jsonPath); err != nil {
			return fail(err)
		}
	}
	if *plots != "" {
		files, err := loadgen.WritePlots(rep, *plots)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "plots: %s\n", strings.Join(files, ", "))
	}
	return 0
}

// onOff reads an on/off/both flag value as the settings to run.
func onOff(flag, v string) ([]bool, error) {
	switch v {
	case "on":
		return []bool{true}, nil
	case "off":
		return []bool{false}, nil
	case "both":
		return []bool{true, false}, nil
	}
	return nil, fmt.Errorf("%s %q: want on, off or both", flag, v)
}

// defaultChaosKinds are --chaos-kinds' default: every fault kind the
// pipeline is held to. A cut combined with a restart, and a cache-keeping
// restart, are documented limits (bench/chaos/README.md, "Limits").
const defaultChaosKinds = "drop,duplicate,reorder,truncate,corrupt,cut"

// runChaos runs the chaos trials and prints their report: 0 when every
// trial kept the rules, 1 when one failed (its seed and repro command are
// in the report), 2 for bad flags.
func runChaos(trials int, seed uint64, kinds string, stdout, stderr io.Writer) int {
	ks, err := chaos.ParseKinds(kinds)
	if err != nil || trials <= 0 {
		fmt.Fprintf(stderr, "kvrouter-bench --chaos: %v\n", cmp.Or(err, fmt.Errorf("--chaos-trials %d must be positive", trials)))
		return 2
	}
	rep := chaos.Run(context.Background(), chaos.Config{Trials: trials, Seed: seed, Plan: chaos.PlanConfig{Kinds: ks},
		Repro: "kvrouter-bench --chaos --chaos-trials 1 --chaos-seed %d --chaos-kinds " + kinds})
	if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "kvrouter-bench --chaos: %v\n", err)
		return 1
	}
	if len(rep.Failures()) > 0 {
		return 1
	}
	return 0
}

func writeJSONReport(rep *loadgen.Report, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startCPUProfile profiles this process into file until the returned func
// is called.
func startCPUProfile(file string) (func(), error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
