package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvrouter/kvrouter/bench/loadgen"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

const disaggHelp = `Usage: kvrouter-bench disagg [flags]

The disaggregated replay (bench/README.md, "Disaggregated replay"): each
trace on a prefill pool and a decode pool of simulated caches with the
engine model's prefill queues and a KV transfer cost per block, once per
split decider — kvrouter's decision (disagg.Decide, serve's defaults),
Dynamo's conditional rule, llm-d's prefix-based decider, always-split and
never-split. Prints, per trace, fleet and decider, the share of requests
split, the prompt tokens not prefilled thanks to a cache hit, the blocks
moved from prefill to decode workers and the TTFT estimate's mean and p99.

Flags:
`

// runDisagg is the disagg subcommand.
func runDisagg(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlags("kvrouter-bench disagg", disaggHelp, stderr)
	traces := fs.String("trace", "builtin:conversation,gen:burst", "comma-separated `traces`, each "+cli.TraceRefHelp)
	fleets := fs.String("disagg-fleet", "2:2,4:12", "comma-separated `P:D` pool sizes: prefill workers, decode workers")
	requests := fs.Int("requests", 2000, "requests per trace, 0 for all")
	tpb := fs.Int("tokens-per-block", 16, "tokens each trace hash_id expands to, and the block size")
	capacity := fs.Int("capacity", 8192, "cache capacity of each simulated worker, in blocks")
	inFlight := fs.Int("in-flight-per-worker", 2, "each request's load is freed this many × (P + D) requests later")
	transfer := fs.String("disagg-transfer-block", "", fmt.Sprintf("KV transfer `seconds` per block (default %g s/token × block size: 128 KiB/token over about 40 GB/s RDMA; about 44e-6 s/token over TCP)", loadgen.DefaultTransferPerToken))
	delay := fs.String("event-delay", loadgen.DelayPrefill, "`prefill` (events visible at the prefill end + the publish interval) or none")
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "kvrouter-bench disagg: %v\n", err); return 1 }
	cfg := loadgen.DisaggRunConfig{Traces: cli.SplitList(*traces), Requests: *requests, TokensPerBlock: *tpb,
		Capacity: *capacity, InFlightPerWorker: *inFlight, Delay: loadgen.DefaultEventDelay()}
	cfg.Delay.Mode = *delay
	if err := cfg.Delay.Validate(); err != nil {
		return fail(err)
	}
	if *requests < 0 || *tpb <= 0 || *capacity <= 0 || *inFlight < 0 {
		return fail(fmt.Errorf("--requests, --tokens-per-block, --capacity, --in-flight-per-worker out of range"))
	}
	var err error
	if cfg.Fleets, err = parseFleets(*fleets); err != nil {
		return fail(err)
	}
	if *transfer != "" {
		if cfg.TransferPerBlock, err = cli.ParseFloat("--disagg-transfer-block", *transfer); err != nil {
			return fail(err)
		}
		if !(cfg.TransferPerBlock > 0) {
			return fail(fmt.Errorf("--disagg-transfer-block %v: want > 0", cfg.TransferPerBlock))
		}
	}
	rows, err := loadgen.RunDisagg(cfg)
	if err != nil {
		return fail(err)
	}
	if err := loadgen.WriteDisaggTable(stdout, rows); err != nil {
		return fail(err)
	}
	return 0
}

// parseFleets reads --disagg-fleet: P:D pairs, each side at least 1.
func parseFleets(v string) ([]loadgen.DisaggFleet, error) {
	var out []loadgen.DisaggFleet
	for _, s := range cli.SplitList(v) {
		p, d, ok := strings.Cut(s, ":")
		np, errP := strconv.Atoi(p)
		nd, errD := strconv.Atoi(d)
		if !ok || errP != nil || errD != nil || np < 1 || nd < 1 || np > 4096 || nd > 4096 {
			return nil, fmt.Errorf("--disagg-fleet %q: want P:D with 1..4096 workers each", s)
		}
		out = append(out, loadgen.DisaggFleet{Prefill: np, Decode: nd})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--disagg-fleet: no fleet")
	}
	return out, nil
}
