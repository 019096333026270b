package requestpath

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
)

// FlowConfig turns flow control on: a request that finds every candidate
// saturated or over the booked-blocks cap (ErrNoRoom) waits in a queue
// instead of being refused, and is routed again — scored against the
// index and loads of that moment — when room frees. Zero values take the
// defaults.
type FlowConfig struct {
	// TTL bounds a request's wait (default 30 s); past it the answer is
	// 429 with Retry-After.
	TTL time.Duration
	// NoEndpointTTL lets a request with no serving endpoint at all wait
	// that long (scale from zero) before its 503; 0 answers 503 at once.
	NoEndpointTTL time.Duration
	// MaxRequests and MaxBytes bound the queue (defaults 1024, 64 MiB);
	// past them the lowest band's newest requests are evicted (429) for a
	// higher band's, and a request nothing can be evicted for is refused.
	MaxRequests int
	MaxBytes    int64
	// Objectives maps an inference objective (the request's
	// x-gateway-inference-objective) to its priority band: higher goes
	// first; a band below 0 is sheddable (refused at once, never queued,
	// as the Gateway API Inference Extension defines it). An objective
	// not listed, and none, is band 0.
	Objectives map[string]int
	// Headroom keeps booked-block room on every worker for the higher
	// bands: a request of a band with k known bands above it is admitted
	// only to a worker with at most ShedAboveBlocks − k × Headroom blocks
	// booked (at least 1), so a high-priority request arriving at a busy
	// fleet finds room at once instead of waiting for the next answer to
	// end. 0 (the default) keeps no headroom. Only with a booked-blocks
	// cap (Config.ShedAboveBlocks). ReserveWorkers keeps room where the
	// higher bands need it rather than everywhere.
	Headroom uint64
	// ReserveWorkers keeps room for the higher bands on that many workers
	// of the fleet rather than on each: a request of a band with k known
	// bands above it is admitted only while, the worker it goes to left
	// aside, at least k × ReserveWorkers workers (healthy, breaker
	// admitting) still have room — engine not saturated, at most
	// Config.ShedAboveBlocks booked. Refused, it waits in the queue as for
	// want of room (the decision outcome reserved). A high-priority
	// request arriving at a busy fleet finds room at once while the lower
	// bands fill the rest. Room kept is between ReserveWorkers requests'
	// worth (the lower bands fill workers evenly) and as many whole
	// workers. The kept room serves a higher-band request only if one of
	// its candidates (Config.MaxCandidates, cheapest first) is a worker
	// with room: the least loaded, unless a full one's cached prefix ranks
	// it above. 0 (the default) keeps none, as does a negative value. Both
	// it and Headroom may be on.
	ReserveWorkers int
}

// Flow control defaults.
const (
	DefaultFlowTTL         = 30 * time.Second
	DefaultFlowMaxRequests = 1024
	DefaultFlowMaxBytes    = 64 << 20
	// FlowRetryAfter is the Retry-After of a request whose wait expired
	// or that was evicted.
	FlowRetryAfter = time.Second
)

// flowState is the queue and its waiters; the Guard's lock covers it.
type flowState struct {
	cfg      FlowConfig
	q        guard.Queue
	waiters  map[uint64]*waiter
	nextID   uint64
	found    map[string]int // SetObjectives' bands, under cfg.Objectives
	busy     bool           // a dispatcher runs
	trying   int            // popped and woken, routing again: still waiting until it requeues or leaves
	again    bool           // kicked while it ran
	outcomes map[[2]string]int64
}

// waiter is one queued request. The dispatcher pops its item and wakes it
// (popped, wake); the waiter routes again and hands the turn back (turn:
// true when there was still no room and it requeued itself). Expiry and
// eviction answer it through done.
type waiter struct {
	item   guard.QueueItem
	noEP   bool // waiting for an endpoint, not for room
	popped bool
	wake   chan struct{}
	turn   chan bool
	done   chan error
}

// Flow outcomes (kvrouter_flow_requests_total's outcome label).
const (
	FlowQueued     = "queued"
	FlowDispatched = "dispatched" // routed after waiting
	FlowExpired    = "expired"    // its TTL passed
	FlowEvicted    = "evicted"    // displaced by a higher band
	FlowGone       = "gone"       // the client went away while queued
	FlowFull       = "full"       // refused: the queue had no room for it
	FlowSheddable  = "sheddable"  // refused: a band below 0 is never queued
)

// QueueError is the answer to a request whose wait ended without room:
// expired or evicted (an ErrOverloaded, 429), or no endpoint appeared in
// time (an ErrNoEndpoint, 503). RetryAfter is FlowRetryAfter.
type QueueError struct {
	Why   string // FlowExpired or FlowEvicted
	Cause error  // the last attempt's refusal
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("flow control: %s while queued (%v)", e.Why, e.Cause)
}

// Unwrap is the last attempt's refusal (ErrOverloaded or ErrNoEndpoint).
func (e *QueueError) Unwrap() error { return e.Cause }

// RetryAfter is the wait the answer suggests.
func (e *QueueError) RetryAfter() time.Duration { return FlowRetryAfter }

func newFlowState(cfg *FlowConfig) *flowState {
	if cfg == nil {
		return nil
	}
	c := *cfg
	if c.TTL <= 0 {
		c.TTL = DefaultFlowTTL
	}
	if c.MaxRequests <= 0 {
		c.MaxRequests = DefaultFlowMaxRequests
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultFlowMaxBytes
	}
	c.ReserveWorkers = max(c.ReserveWorkers, 0)
	return &flowState{cfg: c, q: guard.NewQueue(c.MaxRequests, c.MaxBytes), waiters: map[uint64]*waiter{}, outcomes: map[[2]string]int64{}}
}

// band is objective's priority band: the configured one, else the one
// SetObjectives gave, else 0.
func (f *flowState) band(objective string) int {
	if b, ok := f.cfg.Objectives[objective]; ok {
		return b
	}
	return f.found[objective]
}

// SetObjectives replaces the bands found at run time (the cluster's
// InferenceObjectives); FlowConfig.Objectives still wins for the names it
// gives. A request already queued keeps its band. No-op with flow
// control off.
func (g *Guard) SetObjectives(bands map[string]int) {
	if g == nil || g.flowing == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flowing.found = maps.Clone(bands)
}

// Band is the priority band a request naming objective gets now (0 with
// flow control off).
func (g *Guard) Band(objective string) int {
	if g == nil || g.flowing == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.flowing.band(objective)
}

func (f *flowState) count(band int, outcome string) {
	f.outcomes[[2]string{strconv.Itoa(band), outcome}]++
}

// waitable reports whether a refusal is one a request may wait out.
func (f *flowState) waitable(err error) (ok, noEP bool) {
	switch {
	case errors.Is(err, ErrNoRoom):
		return true, false
	case errors.Is(err, ErrNoEndpoint) && f.cfg.NoEndpointTTL > 0:
		return true, true
	}
	return false, false
}

// flow runs one request's routing attempts (try) under flow control:
// straight through when it is off; otherwise a request arriving while
// others of its band or a higher one wait queues behind them, and one refused for want of room
// queues until it is dispatched, expires, is evicted or its client goes.
func (g *Guard) flow(ctx context.Context, r Request, key string, try func() (*Booking, error)) (*Booking, error) {
	if g == nil || g.flowing == nil {
		return try()
	}
	f := g.flowing
	g.mu.Lock()
	band := f.band(r.Objective)
	behind := f.q.LenFrom(band) > 0 // lower bands queued do not hold it back: it would be dispatched first
	g.mu.Unlock()
	last := fmt.Errorf("%w: %w: requests are queued ahead of it", ErrOverloaded, ErrNoRoom)
	noEP := false
	if !behind || band < 0 {
		b, err := try()
		ok, ne := f.waitable(err)
		if !ok {
			return b, err
		}
		last, noEP = err, ne
	}
	if band < 0 {
		g.mu.Lock()
		f.count(band, FlowSheddable)
		g.mu.Unlock()
		return nil, last
	}
	w, err := g.enqueue(r, key, band, noEP, last)
	if err != nil {
		return nil, err
	}
	g.kick()
	for {
		select {
		case <-w.wake:
			b, err := try()
			if ok, ne := f.waitable(err); ok {
				g.mu.Lock()
				w.noEP, w.popped = ne, false
				f.trying--
				if f.q.Requeue(w.item) {
					f.waiters[w.item.ID] = w
					g.mu.Unlock()
					w.turn <- true
					continue
				}
				f.count(band, FlowFull) // evicted meanwhile by no one but full: give up
				g.mu.Unlock()
				w.turn <- false
				return nil, err
			}
			g.mu.Lock()
			f.trying--
			if err == nil {
				f.count(band, FlowDispatched)
			}
			g.mu.Unlock()
			w.turn <- false
			return b, err
		case err := <-w.done:
			return nil, err
		case <-ctx.Done():
			g.mu.Lock()
			f.count(band, FlowGone)
			if !w.popped {
				f.q.Remove(w.item.ID)
				delete(f.waiters, w.item.ID)
				g.mu.Unlock()
				return nil, ctx.Err()
			}
			f.trying--
			g.mu.Unlock()
			w.turn <- false // the dispatcher woke us: give its turn back
			return nil, ctx.Err()
		}
	}
}

// enqueue queues a request refused with last; the requests it evicts
// are answered.
func (g *Guard) enqueue(r Request, key string, band int, noEP bool, last error) (*waiter, error) {
	f := g.flowing
	g.mu.Lock()
	defer g.mu.Unlock()
	ttl := f.cfg.TTL
	if noEP {
		ttl = f.cfg.NoEndpointTTL
	}
	f.nextID++
	it := guard.QueueItem{ID: f.nextID, Band: band, Flow: key, Bytes: max(r.Bytes, 0), Deadline: g.cfg.Now().Add(ttl)}
	evicted, ok := f.q.Push(it)
	if !ok {
		f.count(band, FlowFull)
		return nil, fmt.Errorf("flow control: the queue is full (%d requests, %d bytes): %w", f.q.Len(), f.q.Bytes(), last)
	}
	for _, ev := range evicted {
		if v := f.waiters[ev.ID]; v != nil {
			delete(f.waiters, ev.ID)
			f.count(ev.Band, FlowEvicted)
			v.done <- &QueueError{Why: FlowEvicted, Cause: fmt.Errorf("%w: %w: evicted by a higher-priority request", ErrOverloaded, ErrNoRoom)}
		}
	}
	w := &waiter{item: it, noEP: noEP, wake: make(chan struct{}, 1), turn: make(chan bool, 1), done: make(chan error, 1)}
	f.waiters[it.ID] = w
	f.count(band, FlowQueued)
	return w, nil
}

// kick starts a dispatcher unless one runs (it then goes round once
// more): room may have freed.
func (g *Guard) kick() {
	if g == nil || g.flowing == nil {
		return
	}
	g.mu.Lock()
	start := g.flowing.q.Len() > 0 && !g.flowing.busy
	if g.flowing.busy {
		g.flowing.again = true
	}
	if start {
		g.flowing.busy = true
	}
	g.mu.Unlock()
	if start {
		go g.dispatchLoop()
	}
}

// Dispatch answers the queued requests whose TTL passed and dispatches
// the others in order while there is room, in the caller's goroutine
// (Run calls it on a tick; tests call it after moving their clock). It
// returns once a dispatched request found no room, or the queue is empty.
func (g *Guard) Dispatch() {
	if g == nil || g.flowing == nil {
		return
	}
	g.mu.Lock()
	if g.flowing.busy {
		g.flowing.again = true
		g.mu.Unlock()
		return
	}
	g.flowing.busy = true
	g.mu.Unlock()
	g.dispatchLoop()
}

func (g *Guard) dispatchLoop() {
	f := g.flowing
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		f.again = false
		for _, it := range f.q.Expired(g.cfg.Now()) {
			if w := f.waiters[it.ID]; w != nil {
				delete(f.waiters, it.ID)
				f.count(it.Band, FlowExpired)
				cause := fmt.Errorf("%w: %w: no worker had room within %v", ErrOverloaded, ErrNoRoom, f.cfg.TTL)
				if w.noEP {
					cause = fmt.Errorf("%w: none appeared within %v", ErrNoEndpoint, f.cfg.NoEndpointTTL)
				}
				w.done <- &QueueError{Why: FlowExpired, Cause: cause}
			}
		}
		it, ok := f.q.Pop()
		if !ok {
			break
		}
		w := f.waiters[it.ID]
		if w == nil {
			continue // cannot happen: every queued item has its waiter
		}
		delete(f.waiters, it.ID)
		w.popped = true
		f.trying++
		w.wake <- struct{}{}
		g.mu.Unlock()
		requeued := <-w.turn
		g.mu.Lock()
		if requeued && !f.again {
			break // still no room: wait for the next free or tick
		}
	}
	f.busy = false
}

// Run dispatches every interval until ctx ends, so requests waiting for
// an engine to recover (its signals, not a free) and TTLs are seen to.
func (g *Guard) Run(ctx context.Context, interval time.Duration) {
	if g == nil || g.flowing == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.Dispatch()
		}
	}
}

// Queued is the number of requests waiting (tests, the bench), the one
// the dispatcher woke to route again included.
func (g *Guard) Queued() int {
	if g == nil || g.flowing == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.flowing.waiting()
}

// Resting returns the number of queued requests once no dispatcher runs,
// ok false while one does (tests, the bench): a request the dispatcher
// woke may be routing again, and room freed meanwhile goes to it rather
// than by the queue's order. Waiting for ok makes the order certain.
func (g *Guard) Resting() (queued int, ok bool) {
	if g == nil || g.flowing == nil {
		return 0, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.flowing
	return f.q.Len(), !f.busy && f.trying == 0
}

// waiting counts the queued requests and the one routing again (g.mu held).
func (f *flowState) waiting() int { return f.q.Len() + f.trying }

// FlowCount is how many requests of band had outcome (tests, the bench).
func (g *Guard) FlowCount(band int, outcome string) int64 {
	if g == nil || g.flowing == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.flowing.outcomes[[2]string{strconv.Itoa(band), outcome}]
}
