package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/actors/enginesignals"
	"github.com/kvrouter/kvrouter/actors/service"
)

const signalsHelp = `
Engine signals: with --engine-signals every rank with a metrics endpoint
(its registration's metrics_endpoint, the kvrouter.io/metrics-port and
/metrics-path annotations, else its serving endpoint's /metrics) is
scraped every --signals-interval: requests waiting and running, KV usage,
the engine's cache size and prefix-cache counters, vLLM's LoRA adapters,
with the names of the rank's engine and version. The routing cost adds
what the engine reports beyond what kvrouter booked on it (outside
traffic, shown in GET /workers); a rank is saturated when more than
--saturation-queue requests wait, its KV usage passes
--saturation-kv-usage, or its metrics are stale (no successful scrape for
--signals-stale-after): saturated ranks get requests only when every rank
is, and then the proxy and the picker answer 429.
`

// signalsFlags are kvrouter serve's engine-signal options.
type signalsFlags struct {
	on                       *bool
	interval, timeout, stale *time.Duration
	queue, kv                *float64
}

func addSignalsFlags(fs *flag.FlagSet) *signalsFlags {
	return &signalsFlags{
		on:       fs.Bool("engine-signals", false, "scrape every rank's engine metrics (queue, running, KV usage) and use them in the cost and for saturation (off by default: an engine without /metrics would be saturated)"),
		interval: fs.Duration("signals-interval", enginesignals.DefaultInterval, "with --engine-signals: time between two scrapes of one engine"),
		timeout:  fs.Duration("signals-timeout", enginesignals.DefaultTimeout, "with --engine-signals: deadline of one scrape"),
		stale:    fs.Duration("signals-stale-after", enginesignals.DefaultStaleAfter, "with --engine-signals: a rank without a successful scrape for this long is stale, hence saturated"),
		queue:    fs.Float64("saturation-queue", enginesignals.DefaultQueueThreshold, "with --engine-signals: a rank with more requests waiting than this is saturated"),
		kv:       fs.Float64("saturation-kv-usage", enginesignals.DefaultKVUsageThreshold, "with --engine-signals: a rank whose KV cache is in use above this share (0-1) is saturated"),
	}
}

// config is the service's SignalsConfig (nil without --engine-signals).
func (f *signalsFlags) config() (*service.SignalsConfig, error) {
	if !*f.on {
		return nil, nil
	}
	if *f.interval <= 0 || *f.timeout <= 0 || *f.stale <= 0 {
		return nil, fmt.Errorf("--signals-interval, --signals-timeout and --signals-stale-after must be positive")
	}
	if *f.stale <= *f.interval {
		return nil, fmt.Errorf("--signals-stale-after %v must be longer than --signals-interval %v, or every rank is stale between two scrapes", *f.stale, *f.interval)
	}
	th := enginesignals.Thresholds{Queue: *f.queue, KVUsage: *f.kv}
	if err := th.Check(); err != nil {
		return nil, err
	}
	return &service.SignalsConfig{Scrape: enginesignals.Config{Interval: *f.interval, Timeout: *f.timeout, StaleAfter: *f.stale},
		Thresholds: th}, nil
}
