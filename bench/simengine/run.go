package simengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// RunConfig paces a Driver against an Engine.
type RunConfig struct {
	Driver Driver
	// Rate is requests per second. 0 follows each Prompt.At (a trace's own
	// timing); RandomDriver's prompts then go out as fast as they are made.
	Rate float64
	// BlockRate, when positive, paces by stored blocks instead of requests
	// (it overrides Rate): a request is due once the blocks this run has
	// stored so far are due at BlockRate per second from the start, so the
	// engine offers a steady ingest whatever each prompt's hit rate. An
	// engine that falls more than maxBacklog behind (its core busy) drops
	// the rest of its backlog instead of bursting to catch up.
	BlockRate float64
	// Requests stops after this many; 0 runs until the driver ends or the
	// context is done.
	Requests int
	// Heartbeat publishes an empty batch this often (TensorRT-LLM style);
	// 0 never.
	Heartbeat time.Duration
	// Status, when set, is called with the engine's stats every StatusEvery
	// (default 5s) and once at the end.
	Status      func(Stats)
	StatusEvery time.Duration
}

// Run serves the driver's prompts at the configured pace. It returns nil
// when the driver is exhausted, Requests are served or ctx is done, and an
// error when the driver fails or the engine is closed.
func (e *Engine) Run(ctx context.Context, cfg RunConfig) error {
	if cfg.Driver == nil {
		return errors.New("simengine: run: no driver")
	}
	if cfg.Rate < 0 || cfg.BlockRate < 0 {
		return fmt.Errorf("simengine: run: rate %v, block rate %v, want ≥ 0", cfg.Rate, cfg.BlockRate)
	}
	p, stop := e.newPacer(ctx, cfg)
	defer stop()
	start := time.Now()
	stored0 := e.Stats().Cache.StoredBlocks
	for served := 0; cfg.Requests == 0 || served < cfg.Requests; served++ {
		pr, err := cfg.Driver.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("simengine: run: prompt %d: %w", served+1, err)
		}
		due := start.Add(pr.At)
		switch {
		case cfg.BlockRate > 0:
			due = blockDue(&start, e.Stats().Cache.StoredBlocks-stored0, cfg.BlockRate)
		case cfg.Rate > 0:
			due = start.Add(time.Duration(float64(served) / cfg.Rate * float64(time.Second)))
		}
		if !p.waitUntil(due) {
			return nil
		}
		if _, err := e.ServeRequest(Request{Tokens: pr.Tokens, SessionID: pr.SessionID}); err != nil {
			return fmt.Errorf("simengine: run: serve prompt %d: %w", served+1, err)
		}
	}
	return nil
}

// maxBacklog is how far behind its block rate an engine may run before it
// gives up the difference.
const maxBacklog = 100 * time.Millisecond

// blockDue is when the next batch is due once blocks are sent at rate
// blocks/s from *start; more than maxBacklog late, *start moves up so the
// rest of the backlog is dropped instead of sent in a burst.
func blockDue(start *time.Time, blocks uint64, rate float64) time.Time {
	due := start.Add(time.Duration(float64(blocks) / rate * float64(time.Second)))
	if late := time.Since(due); late > maxBacklog {
		*start, due = start.Add(late-maxBacklog), due.Add(late-maxBacklog)
	}
	return due
}

// newPacer starts cfg's status and heartbeat tickers; stop ends them and
// reports the final status.
func (e *Engine) newPacer(ctx context.Context, cfg RunConfig) (p *pacer, stop func()) {
	if cfg.StatusEvery <= 0 {
		cfg.StatusEvery = 5 * time.Second
	}
	p = &pacer{e: e, cfg: cfg, ctx: ctx}
	var stops []func()
	if cfg.Status != nil {
		t := time.NewTicker(cfg.StatusEvery)
		p.status = t.C
		stops = append(stops, t.Stop, func() { cfg.Status(e.Stats()) })
	}
	if cfg.Heartbeat > 0 {
		t := time.NewTicker(cfg.Heartbeat)
		p.heartbeat = t.C
		stops = append(stops, t.Stop)
	}
	return p, func() {
		for _, f := range stops {
			f()
		}
	}
}

// pacer waits for a request's due time while serving status and heartbeat
// ticks.
type pacer struct {
	e         *Engine
	cfg       RunConfig
	ctx       context.Context
	status    <-chan time.Time
	heartbeat <-chan time.Time
}

// waitUntil reports false when the context ended first. A due time
// already past costs no timer: the ticks pending are served and it returns.
func (p *pacer) waitUntil(due time.Time) bool {
	if !time.Now().Before(due) {
		select {
		case <-p.ctx.Done():
			return false
		case <-p.status:
			p.cfg.Status(p.e.Stats())
		case <-p.heartbeat:
			_ = p.e.Publish()
		default:
		}
		return true
	}
	timer := time.NewTimer(time.Until(due))
	defer timer.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return false
		case <-timer.C:
			return true
		case <-p.status:
			p.cfg.Status(p.e.Stats())
		case <-p.heartbeat:
			_ = p.e.Publish() // a closed engine surfaces in the next ServeRequest
		}
	}
}
