package main

import (
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

// predictFlags are serve's predict-on-route and event-less worker flags
// (actors/routing/predicted).
type predictFlags struct {
	ttl, eventLessTTL          *time.Duration
	maxBlocks, eventLessBlocks *int
	waitFalloff                *float64
	waitCheck                  *bool
}

func addPredictFlags(fs *flag.FlagSet) *predictFlags {
	return &predictFlags{
		ttl: fs.Duration("predict-ttl", predicted.DefaultTTL,
			"how long a routed request's blocks count as held by its worker before the engine's events confirm them (predict-on-route; 0: off for workers that publish events)"),
		maxBlocks: fs.Int("predict-max-blocks", predicted.DefaultMaxBlocks,
			"predicted blocks kept per (model, tenant) for workers that publish events; the least recently routed is evicted past it (counted)"),
		eventLessTTL: fs.Duration("eventless-ttl", predicted.DefaultEventLessTTL,
			`how long an event-less worker's (registered with "events":"none") block counts as cached without another request routed there`),
		eventLessBlocks: fs.Int("eventless-cache-blocks", predicted.DefaultEventLessBlocks,
			fmt.Sprintf(`approximate cache size, in blocks, of an event-less worker registered without cache_blocks (at most %d); LRU-evicted past it`, predicted.MaxEventLessBlocks)),
		waitFalloff: fs.Float64("predict-wait-falloff", routing.DefaultPredictedWaitFalloff,
			"with --cost kvrouter: how fast the credit of blocks a worker holds only by prediction falls while requests routed there still wait to prefill them (1 / (1 + waiting × idle share / falloff), idle share: the workers with no request in flight; 0, the default: full credit). Spreads a burst's siblings over idle workers instead of queueing them all behind the first one's prefill: pays on large fleets (64 workers and more in kvrouter-bench), costs small ones a little hit rate"),
		waitCheck: fs.Bool("predict-wait-check", routing.DefaultPredictedWaitCheck,
			"with --cost kvrouter: a worker's predicted blocks that earlier requests still wait to prefill earn no credit when an idle worker (no request in flight) prefilling the whole request would reach its first token sooner — by more than the recompute's share of the idle workers (tokens computed again / idle workers) — so a burst's siblings spread over idle workers only while the fleet has them to spare; false: predicted blocks earn their credit"),
	}
}

// routing sets rc's predicted-wait falloff and check when their flags were
// given (the cost's defaults otherwise).
func (f *predictFlags) routing(fs *flag.FlagSet, rc *routing.Config) error {
	if cli.FlagSet(fs, "predict-wait-check") {
		rc.PredictedWaitCheck = *f.waitCheck
	}
	if !cli.FlagSet(fs, "predict-wait-falloff") {
		return nil
	}
	if err := checkWaitFalloff(*f.waitFalloff); err != nil {
		return err
	}
	rc.PredictedWaitFalloff = *f.waitFalloff
	return nil
}

// checkWaitFalloff refuses a --predict-wait-falloff (serve's, demo's)
// that is negative or not finite.
func checkWaitFalloff(v float64) error {
	if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Errorf("--predict-wait-falloff %v: want 0 (off) or a finite positive number", v)
	}
	return nil
}

// config checks the flags and returns the prediction configuration.
func (f *predictFlags) config() (predicted.Config, error) {
	switch {
	case *f.ttl < 0:
		return predicted.Config{}, fmt.Errorf("--predict-ttl %v: want 0 (off) or more", *f.ttl)
	case *f.maxBlocks <= 0:
		return predicted.Config{}, fmt.Errorf("--predict-max-blocks %d: must be positive", *f.maxBlocks)
	case *f.eventLessTTL <= 0:
		return predicted.Config{}, fmt.Errorf("--eventless-ttl %v: must be positive", *f.eventLessTTL)
	case *f.eventLessBlocks <= 0 || *f.eventLessBlocks > predicted.MaxEventLessBlocks:
		return predicted.Config{}, fmt.Errorf("--eventless-cache-blocks %d: want 1 to %d", *f.eventLessBlocks, predicted.MaxEventLessBlocks)
	}
	c := predicted.Config{TTL: *f.ttl, MaxBlocks: *f.maxBlocks, EventLessTTL: *f.eventLessTTL, EventLessBlocks: *f.eventLessBlocks}
	if c.TTL == 0 {
		c.TTL = predicted.Off
	}
	return c, nil
}
