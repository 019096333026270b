package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kvrouter/kvrouter/bench/pinned"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

const pinnedIngestHelp = `Usage: kvrouter-bench pinned-ingest [flags]

The router's end-to-end ingest out of process (method in bench/pinned's
package doc, "Ingest"; figures in bench/README.md): ZeroMQ → listener →
normalizer → coalescer → index in a kvrouter serve process pinned to
--router-cpu with taskset, fed by --publishers replay publishers (kvrouter
sim --pre-encode: Mooncake trace batches encoded ahead of time, published
in a loop in vLLM's frames with real seqs and a replay endpoint) on
--load-cpu. For each offered rate (stored blocks/s of all publishers; 0 is
flat out) a fresh router and fresh publishers run --warmup, then --duration
is measured. Prints per point the blocks/s the publishers sent and the
router's index applied (its kvrouter_index_stored_blocks_total), the
router's CPU (from /proc: share of the window, seconds per million blocks,
blocks per CPU-second), the gaps, replays, resyncs and drops it counted,
and whether it kept up.

Needs the kvrouter binary (make build; --kvrouter, default: beside this
binary).

Flags:
`

// runPinnedIngest is the pinned-ingest subcommand.
func runPinnedIngest(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlags("kvrouter-bench pinned-ingest", pinnedIngestHelp, stderr)
	quick := fs.Bool("quick", false, "smoke preset: one 2 s point at 250k blocks/s, 2 publishers of 50,000 blocks (default: 250k,500k,1M,1.5M,2M blocks/s and flat out, 4 publishers of 200,000 blocks, 5 s points)")
	kvrouter := fs.String("kvrouter", "", "the kvrouter `binary` (default: kvrouter beside this binary)")
	jsonPath := fs.String("json", "", "also write the report as JSON to this `file`")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	pf := newPresetFlags(fs, pinned.DefaultIngestConfig())
	num, span := pf.num, pf.span
	pf.list("rates", "comma-separated offered `rates`, stored blocks/s of all publishers; 0 is flat out (default 250000,500000,1000000,1500000,2000000,0)", func(c *pinned.IngestConfig) *[]float64 { return &c.Rates })
	num("publishers", "replay publisher processes (kvrouter sim --pre-encode), each offering its share of the rate", func(c *pinned.IngestConfig) *int { return &c.Publishers })
	num("pre-encode", "stored blocks each publisher encodes before it publishes (one pass of its loop)", func(c *pinned.IngestConfig) *int { return &c.PreEncode })
	num("capacity", "each publisher's cache while it records, in blocks", func(c *pinned.IngestConfig) *int { return &c.Capacity })
	num("hwm", "each publisher's PUB high-water mark, in messages (vLLM's default: 100000)", func(c *pinned.IngestConfig) *int { return &c.HWM })
	num("shards", "the router's --shards", func(c *pinned.IngestConfig) *int { return &c.Shards })
	num("router-cpu", "core of the router under test", func(c *pinned.IngestConfig) *int { return &c.RouterCPU })
	num("load-cpu", "core of the publishers", func(c *pinned.IngestConfig) *int { return &c.LoadCPU })
	span("duration", "measured time per point", func(c *pinned.IngestConfig) *time.Duration { return &c.Duration })
	span("warmup", "unmeasured time per point before --duration, at the point's rate", func(c *pinned.IngestConfig) *time.Duration { return &c.Warmup })
	profile := fs.String("router-cpuprofile", "", "write a CPU profile of the router over the measured part of one point to this `file` (go tool pprof; serve runs with --pprof-listen on loopback)")
	profileRate := fs.Float64("profile-rate", -1, "--router-cpuprofile: the offered `rate` of the profiled point (default: the last of --rates)")
	pf.flag("pin", "pin with taskset (false: run unpinned)", func(c *pinned.IngestConfig) *bool { return &c.Pin })
	num("nice", "nice value of the router, the publishers and this process (-20..19; below 0 needs CAP_SYS_NICE): on a machine shared with other jobs, a raised priority gives the router its core back", func(c *pinned.IngestConfig) *int { return &c.Nice })
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "kvrouter-bench pinned-ingest: %v\n", err); return 1 }
	cfg := pf.def
	if *quick {
		cfg = pinned.QuickIngestConfig()
	}
	if err := pf.apply(&cfg); err != nil {
		return fail(err)
	}
	cfg.RouterProfile, cfg.ProfileRate = *profile, *profileRate
	if cfg.ProfileRate < 0 && len(cfg.Rates) > 0 {
		cfg.ProfileRate = cfg.Rates[len(cfg.Rates)-1]
	}
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	if cfg.KVRouter, err = kvrouterBinary(*kvrouter, self); err != nil {
		return fail(err)
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := pinned.RunIngest(ctx, cfg)
	if err == nil {
		err = writeReport(stdout, *jsonPath, rep)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}
