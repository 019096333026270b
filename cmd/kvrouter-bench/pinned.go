package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/kvrouter/kvrouter/bench/pinned"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

const pinnedHelp = `Usage: kvrouter-bench pinned [flags]

The pinned, out-of-process /route load (method in bench/pinned's package
doc; figures in bench/README.md). The router under test runs as its own
kvrouter serve process pinned to --router-cpu with taskset; --engines
kvrouter sim processes (Mooncake trace prompts, LRU caches, real KV events;
at --engine-nice) and the load generator (this process, vegeta as a
library) on --load-cpu.
The generator offers /route at a constant rate, open loop, and measures
each request from its scheduled send time (no coordinated omission). The
floor — a plain net/http server (kvrouter-bench floor-server) that decodes
the same JSON body and answers a fixed small JSON — is measured the same
way on the same core, with the engines running. Prints, per ingest rate
and request rate, the floor's and kvrouter's p50/p99/p99.9 and their
ratio. Without taskset it runs unpinned and says so.

Needs the kvrouter binary (make build; --kvrouter, default: beside this
binary).

Flags:
`

// runPinned is the pinned subcommand.
func runPinned(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlags("kvrouter-bench pinned", pinnedHelp, stderr)
	quick := fs.Bool("quick", false, "smoke preset: 1k and 5k req/s at 100k blocks/s, 2 engines, 2 s points (default: 1k,5k,10k,20k req/s at 100k,500k blocks/s, 4 engines, 5 s points)")
	kvrouter := fs.String("kvrouter", "", "the kvrouter `binary` (default: kvrouter beside this binary)")
	jsonPath := fs.String("json", "", "also write the report as JSON to this `file`")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	pf := newPresetFlags(fs, pinned.DefaultConfig())
	list, num, span := pf.list, pf.num, pf.span
	list("rates", "comma-separated offered /route `rates`, requests/s (default 1000,5000,10000,20000)", func(c *pinned.Config) *[]float64 { return &c.Rates })
	list("ingest", "comma-separated engine ingest `rates`, stored blocks/s in all (default 100000,500000)", func(c *pinned.Config) *[]float64 { return &c.Ingest })
	num("engines", "simulated engine processes", func(c *pinned.Config) *int { return &c.Engines })
	num("engine-nice", "nice value of the engines (0..19): they take what the generator leaves of its core", func(c *pinned.Config) *int { return &c.EngineNice })
	num("nice", "nice value of the generator, the router and the floor (-20..--engine-nice; below 0 needs CAP_SYS_NICE): on a machine shared with other jobs, a raised priority gives the measured processes their cores back", func(c *pinned.Config) *int { return &c.Nice })
	num("capacity", "cache capacity of each engine, in blocks", func(c *pinned.Config) *int { return &c.Capacity })
	num("shards", "the router's --shards", func(c *pinned.Config) *int { return &c.Shards })
	num("router-cpu", "core of the router under test and the floor", func(c *pinned.Config) *int { return &c.RouterCPU })
	num("load-cpu", "core of the generator and the engines", func(c *pinned.Config) *int { return &c.LoadCPU })
	num("max-conns", "the generator's concurrent requests (and connections) at most; past it a due request waits, and its wait counts", func(c *pinned.Config) *int { return &c.MaxConns })
	span("duration", "measured time per point", func(c *pinned.Config) *time.Duration { return &c.Duration })
	span("warmup", "unmeasured time per point before --duration, at the point's rate", func(c *pinned.Config) *time.Duration { return &c.Warmup })
	span("fill-timeout", "wait at most this long for the router's index to fill before its points", func(c *pinned.Config) *time.Duration { return &c.FillTimeout })
	span("timeout", "one request's timeout (counted as an error)", func(c *pinned.Config) *time.Duration { return &c.Timeout })
	profile := fs.String("router-cpuprofile", "", "write a CPU profile of the router process over the measured part of one point to this `file` (go tool pprof; serve runs with --pprof-listen on loopback)")
	profileRate := fs.Float64("profile-rate", 0, "--router-cpuprofile: the offered `rate` of the profiled point, at the first ingest rate (default: the highest of --rates)")
	genProfile := fs.String("generator-cpuprofile", "", "write a CPU profile of this process (the generator) over the whole run to this `file` (go tool pprof)")
	pf.flag("pin", "pin with taskset (false: run unpinned)", func(c *pinned.Config) *bool { return &c.Pin })
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "kvrouter-bench pinned: %v\n", err); return 1 }
	cfg := pf.def
	if *quick {
		cfg = pinned.QuickConfig()
	}
	if err := pf.apply(&cfg); err != nil {
		return fail(err)
	}
	cfg.RouterProfile, cfg.ProfileRate = *profile, *profileRate
	if cfg.ProfileRate == 0 && len(cfg.Rates) > 0 {
		cfg.ProfileRate = slices.Max(cfg.Rates)
	}
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	cfg.Floor = []string{self, "floor-server"}
	if cfg.KVRouter, err = kvrouterBinary(*kvrouter, self); err != nil {
		return fail(err)
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *genProfile != "" {
		stopProfile, err := startCPUProfile(*genProfile)
		if err != nil {
			return fail(err)
		}
		defer stopProfile()
	}
	rep, err := pinned.Run(ctx, cfg)
	if err == nil {
		err = writeReport(stdout, *jsonPath, rep)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// runFloorServer is the hidden floor-server subcommand: the floor the
// pinned mode measures kvrouter against.
func runFloorServer(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlags("kvrouter-bench floor-server", "Usage: kvrouter-bench floor-server --http ADDR\n\nThe pinned mode's floor: decodes /route bodies, answers a fixed JSON.\n\nFlags:\n", stderr)
	addr := fs.String("http", "127.0.0.1:8091", "listen `address`")
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := pinned.ServeFloor(ctx, *addr); err != nil {
		fmt.Fprintf(stderr, "kvrouter-bench floor-server: %v\n", err)
		return 1
	}
	return 0
}
