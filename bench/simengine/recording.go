package simengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Recording is an engine's batches encoded ahead of time: what serving a
// driver's prompts on a cache like the engine's published, payload by
// payload, without the seq (taken when each is sent). Publishing it
// (Engine.RunRecording) costs the engine a ZeroMQ send per batch and
// nothing per block, so one core can offer a router far more blocks per
// second than an engine that hashes prompts, runs its LRU and encodes
// while it publishes.
type Recording struct {
	Payloads [][]byte
	// Stored is the stored blocks of each payload; Blocks their sum.
	Stored []int
	Blocks int
	// Requests is the prompts served to make it.
	Requests int
}

// Record serves drv's prompts on a fresh cache configured like the
// engine's (block size, capacity, dp rank, medium, hash seed) and encodes
// each batch they cause in the engine's encoding, until the batches hold
// at least blocks stored blocks or drv ends (io.EOF). Its last batch is an
// AllBlocksCleared, so the recording can be published in a loop: every
// pass starts from an empty cache, as the first did, and the events of a
// pass are exactly what an engine serving those prompts from empty emits.
// The engine's own cache is not touched.
func (e *Engine) Record(drv Driver, blocks int) (*Recording, error) {
	if blocks <= 0 {
		return nil, fmt.Errorf("simengine: record: %d blocks, want > 0", blocks)
	}
	cache, err := NewCache(Config{BlockSize: e.opts.BlockSize, CapacityBlocks: e.opts.CapacityBlocks,
		DpRank: e.opts.DpRank, Medium: e.opts.Medium, HashSeed: e.opts.HashSeed})
	if err != nil {
		return nil, err
	}
	enc, err := NewEncoder(e.opts.Encoding)
	if err != nil {
		return nil, err
	}
	rec := &Recording{}
	add := func(events []Event) error {
		payload, err := e.encode(enc, events)
		if err != nil {
			return err
		}
		n := storedBlocks(events)
		rec.Payloads, rec.Stored, rec.Blocks = append(rec.Payloads, payload), append(rec.Stored, n), rec.Blocks+n
		return nil
	}
	for rec.Blocks < blocks {
		p, err := drv.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("simengine: record: prompt %d: %w", rec.Requests+1, err)
		}
		rec.Requests++
		if _, events := cache.ServeRequest(Request{Tokens: p.Tokens, SessionID: p.SessionID}); len(events) > 0 {
			if err := add(events); err != nil {
				return nil, err
			}
		}
	}
	if rec.Blocks == 0 {
		return nil, errors.New("simengine: record: the driver's prompts stored no block")
	}
	return rec, add(cache.Clear())
}

// RunRecording publishes rec's batches in order, in a loop (each a fresh
// seq, kept for replay like any batch), paced by cfg.BlockRate stored
// blocks per second — 0 sends flat out — until ctx is done or
// cfg.Requests batches are sent. cfg.Driver and cfg.Rate are not used;
// status and heartbeats work as in Run. The engine's cache is left as it
// was: Contents does not describe what was published.
func (e *Engine) RunRecording(ctx context.Context, rec *Recording, cfg RunConfig) error {
	if rec == nil || len(rec.Payloads) == 0 {
		return errors.New("simengine: run recording: nothing recorded")
	}
	if cfg.BlockRate < 0 {
		return fmt.Errorf("simengine: run recording: block rate %v, want ≥ 0", cfg.BlockRate)
	}
	p, stop := e.newPacer(ctx, cfg)
	defer stop()
	start := time.Now()
	var sent uint64
	for n := 0; cfg.Requests == 0 || n < cfg.Requests; n++ {
		i := n % len(rec.Payloads)
		due := start
		if cfg.BlockRate > 0 {
			due = blockDue(&start, sent, cfg.BlockRate)
		}
		if !p.waitUntil(due) {
			return nil
		}
		if err := e.sendRecorded(rec.Payloads[i], rec.Stored[i]); err != nil {
			return fmt.Errorf("simengine: run recording: batch %d: %w", n+1, err)
		}
		sent += uint64(rec.Stored[i])
	}
	return nil
}

// sendRecorded sends one recorded payload as the next batch.
func (e *Engine) sendRecorded(payload []byte, stored int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	return e.sendLocked(payload, stored)
}
