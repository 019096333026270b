package simengine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A prefill model for the OpenAI surface (HTTPOptions.Prefill). Without
// it a request's KV events are published the moment it is served, before
// its first token, which no real engine does: vLLM and SGLang publish a
// BlockStored only in the engine step that computed the blocks, so a
// router learns of a prompt's prefix only once its prefill ended — while
// the sibling requests sharing it keep arriving. With it the surface
// prefills one request at a time, first come first served, at
// TokensPerSecond of uncached prompt tokens; the first token streams at
// the request's prefill end and its events (ServeDeferred) are published
// PublishInterval later (the step's batch), in serve order, so the
// engine's event order is its cache's order. The engine's own cache holds
// the blocks from the serve on (a sibling served meanwhile on the same
// engine hits them), as the bench's engine model does; a real engine
// would compute a block still in flight once more, or wait for it.

// PrefillOptions model the prefill of the surface's requests.
type PrefillOptions struct {
	// TokensPerSecond is the prefill rate, in uncached prompt tokens per
	// second (> 0).
	TokensPerSecond float64
	// PublishInterval is the time from a prefill's end to the publish of
	// its events (≥ 0).
	PublishInterval time.Duration
}

// PrefillStats count the deferred publishes of a surface with a prefill
// model: the batches published, and those published before their
// request's prefill ended (always 0 unless the model is broken; the demo
// prints it); MinLag is the smallest time from a prefill's end to its
// publish.
type PrefillStats struct {
	Batches, Early int
	MinLag         time.Duration
}

// deferredBatch is one request's events waiting for their publish time.
type deferredBatch struct {
	end, at time.Time
	events  []Event
}

// prefillQueue is the bound on requests whose events wait: past it a
// request waits to be served (the engine's queue is full).
const prefillQueue = 4096

// prefiller is a surface's prefill model: its engine's busy time and the
// publisher of the deferred events.
type prefiller struct {
	eng  *Engine
	opts PrefillOptions
	mu   sync.Mutex // serves and bookings in one order
	busy time.Time  // when the engine's last booked prefill ends
	q    chan deferredBatch
	stop chan struct{}
	done chan struct{}

	statsMu sync.Mutex
	stats   PrefillStats
}

func (o PrefillOptions) check() error {
	if !(o.TokensPerSecond > 0) || o.PublishInterval < 0 {
		return errors.New("simengine: prefill: want a positive rate and a publish interval ≥ 0")
	}
	return nil
}

func newPrefiller(eng *Engine, opts PrefillOptions) *prefiller {
	p := &prefiller{eng: eng, opts: opts, q: make(chan deferredBatch, prefillQueue),
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.publish()
	return p
}

// serve serves r on the engine and books its prefill after the ones
// before it; it returns the cached blocks and the prefill's end. The
// events are published at end + PublishInterval.
func (p *prefiller) serve(ctx context.Context, r Request) (cached int, end time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cached, events, err := p.eng.ServeDeferred(r)
	if err != nil {
		return 0, time.Time{}, err
	}
	bs := p.eng.opts.BlockSize
	uncached := max(len(r.Tokens)-cached*bs, 0)
	start := time.Now()
	if p.busy.After(start) {
		start = p.busy
	}
	end = start.Add(time.Duration(float64(uncached) / p.opts.TokensPerSecond * float64(time.Second)))
	p.busy = end
	b := deferredBatch{end: end, at: end.Add(p.opts.PublishInterval), events: events}
	select {
	case p.q <- b:
	case <-p.stop:
		return 0, time.Time{}, ErrClosed
	case <-ctx.Done(): // the cache changed: the events must still go out
		select {
		case p.q <- b:
		case <-p.stop:
		}
	}
	return cached, end, nil
}

// publish sends each request's events at its publish time, in serve
// order (publish times never decrease: prefills are booked one after the
// other).
func (p *prefiller) publish() {
	defer close(p.done)
	for {
		var b deferredBatch
		select {
		case b = <-p.q:
		case <-p.stop:
			return
		}
		if d := time.Until(b.at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-p.stop:
				t.Stop()
				return
			}
		}
		now := time.Now()
		if len(b.events) > 0 && p.eng.PublishEvents(b.events) == nil {
			p.statsMu.Lock()
			lag := now.Sub(b.end)
			if p.stats.Batches == 0 || lag < p.stats.MinLag {
				p.stats.MinLag = lag
			}
			p.stats.Batches++
			if lag < 0 {
				p.stats.Early++
			}
			p.statsMu.Unlock()
		}
	}
}

func (p *prefiller) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// PrefillStats reports the deferred publishes so far (zero without a
// prefill model).
func (s *HTTPServer) PrefillStats() PrefillStats {
	if s.pre == nil {
		return PrefillStats{}
	}
	s.pre.statsMu.Lock()
	defer s.pre.statsMu.Unlock()
	return s.pre.stats
}

// serve serves a request's tokens, through the prefill model when there
// is one; end is its prefill's end (zero without a model).
func (s *HTTPServer) serve(ctx context.Context, tokens []uint32) (cached int, end time.Time, err error) {
	if s.pre == nil {
		cached, err = s.eng.ServeRequest(Request{Tokens: tokens})
		return cached, time.Time{}, err
	}
	return s.pre.serve(ctx, Request{Tokens: tokens})
}

// waitPrefill waits until end, false when the client went away first.
func waitPrefill(ctx context.Context, end time.Time) bool {
	d := time.Until(end)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
