package loadgen

import (
	"fmt"
	"math"
)

// The engine model behind the quality replays' load and TTFT estimate
// (bench/README.md, "Engine model"): request i arrives at i × Gap seconds
// (or at Arrivals[i] when the workload has its own clock: bursts);
// each worker prefills one request at a time, first come first served, at
// PrefillRate uncached tokens per second, so a request's prefill starts
// when both it and the worker's earlier booked prefill are there, and its
// time to first token is its wait plus uncached tokens / PrefillRate. A
// request's prefill is done when that time has passed; it is freed (its
// decode ends) InFlight requests after it arrived.
const (
	// ModelPrefillRate is the engine model's prefill rate per worker, in
	// uncached prompt tokens per second. Every figure of the estimate
	// scales with 1/rate; the ranking of policies does not depend on it.
	ModelPrefillRate = 10_000
	// ModelOfferedLoad is the offered prefill load as a fraction of the
	// fleet's prefill capacity if nothing were cached: the arrival gap is
	// mean prompt tokens / (workers × rate × load). Hits lower the real
	// load; imbalance raises it on the busier workers.
	ModelOfferedLoad = 0.7
)

// FleetConfig sizes the engine model of one replay.
type FleetConfig struct {
	Workers   int
	BlockSize int // tokens per block
	Capacity  int // blocks per worker (for KV utilisation)
	// InFlight: request i is freed when request i + InFlight arrives.
	InFlight int
	// Gap is the time between arrivals, in seconds (ArrivalGap).
	Gap float64
	// Arrivals, when set, is each request's arrival in seconds
	// (non-decreasing, one per request; ArrivalTimes): it replaces i × Gap.
	Arrivals []float64
	// PrefillRate is uncached tokens per second per worker (ModelPrefillRate).
	PrefillRate float64
}

// ArrivalGap is the arrival interval that offers ModelOfferedLoad of the
// fleet's uncached prefill capacity for reqs on workers workers.
func ArrivalGap(reqs []Request, workers int) float64 {
	if len(reqs) == 0 || workers <= 0 {
		return 0
	}
	total := 0
	for _, r := range reqs {
		total += len(r.Tokens)
	}
	mean := float64(total) / float64(len(reqs))
	return mean / (float64(workers) * ModelPrefillRate * ModelOfferedLoad)
}

// WorkerLoad is what the engine model says of one worker at an arrival —
// the signals the policies read (each the one its router gets: in-flight
// counts kept by the router, queue length and KV usage from the engine's
// metrics, booked prefill from the router's bookkeeping).
type WorkerLoad struct {
	// Running counts requests routed to the worker and not freed.
	Running int
	// Waiting counts running requests whose prefill is not done.
	Waiting int
	// PrefillTokens is the uncached tokens of the waiting requests.
	PrefillTokens int64
	// Blocks is ⌈prompt / block size⌉ summed over running requests.
	Blocks int64
}

// activeBlocks counts, per block hash, the running requests of one worker
// that hold it (requests booked with their chain: BookChain).
type activeBlocks map[uint64]int32

// fleetReq is one booked request of the model.
type fleetReq struct {
	worker          int32
	done, freed     bool
	prefill, blocks int64
	finish          float64
	chain           []uint64 // BookChain's, for the active-block counts
	outside         bool     // BookOutside's: not routed by the router under test
}

// Fleet is the engine model: pure, deterministic, driven one request at a
// time by Advance then Book.
type Fleet struct {
	cfg    FleetConfig
	loads  []WorkerLoad
	freeAt []float64 // when each worker's booked prefill ends
	queues [][]int   // per worker, its waiting requests in finish order
	reqs   []fleetReq
	ttft   []float64
	active []activeBlocks // per worker, the blocks of running requests
	ext    []WorkerLoad   // per worker, the outside requests' share of loads (outside.go)
}

// NewFleet returns an idle fleet.
func NewFleet(cfg FleetConfig) (*Fleet, error) {
	if cfg.Workers <= 0 || cfg.BlockSize <= 0 || cfg.Capacity <= 0 || cfg.InFlight < 0 ||
		cfg.Gap < 0 || !(cfg.PrefillRate > 0) || math.IsInf(cfg.PrefillRate, 0) {
		return nil, fmt.Errorf("loadgen: fleet config %+v out of range", cfg)
	}
	for i := 1; i < len(cfg.Arrivals); i++ {
		if !(cfg.Arrivals[i] >= cfg.Arrivals[i-1]) {
			return nil, fmt.Errorf("loadgen: fleet arrival %d at %v s is before arrival %d at %v s", i, cfg.Arrivals[i], i-1, cfg.Arrivals[i-1])
		}
	}
	f := &Fleet{cfg: cfg, loads: make([]WorkerLoad, cfg.Workers), freeAt: make([]float64, cfg.Workers),
		queues: make([][]int, cfg.Workers), active: make([]activeBlocks, cfg.Workers), ext: make([]WorkerLoad, cfg.Workers)}
	for w := range f.active {
		f.active[w] = activeBlocks{}
	}
	return f, nil
}

// Workers is the fleet size.
func (f *Fleet) Workers() int { return f.cfg.Workers }

// Load is worker w's load at the current arrival.
func (f *Fleet) Load(w int) WorkerLoad { return f.loads[w] }

// KVUsage is worker w's KV-cache utilisation as an engine reports it: the
// blocks its running requests hold over its capacity (at most 1).
func (f *Fleet) KVUsage(w int) float64 {
	return min(1, float64(f.loads[w].Blocks)/float64(f.cfg.Capacity))
}

// ActiveBlocks is how many distinct blocks the running requests booked
// with their chain hold on worker w (a block shared by several counts once).
func (f *Fleet) ActiveBlocks(w int) int { return len(f.active[w]) }

// NewBlocks is how many blocks of chain are not held by a running request
// on worker w.
func (f *Fleet) NewBlocks(w int, chain []uint64) int {
	n := 0
	for _, h := range chain {
		if f.active[w][h] == 0 {
			n++
		}
	}
	return n
}

// Now is the arrival time of the next request, in seconds.
func (f *Fleet) Now() float64 { return f.now() }

// now is the arrival time of the next request: Arrivals[i], i × Gap past
// their end (or without them).
func (f *Fleet) now() float64 {
	i := len(f.reqs)
	if n := len(f.cfg.Arrivals); n > 0 {
		if i < n {
			return f.cfg.Arrivals[i]
		}
		return f.cfg.Arrivals[n-1] + float64(i-n+1)*f.cfg.Gap
	}
	return float64(i) * f.cfg.Gap
}

// Advance moves the model to the next request's arrival and returns the
// requests (by index) whose prefill completed since, then those freed.
func (f *Fleet) Advance() (done, freed []int) {
	now := f.now()
	for w, q := range f.queues {
		n := 0
		for n < len(q) && f.reqs[q[n]].finish <= now {
			done = append(done, q[n])
			f.finishPrefill(q[n])
			n++
		}
		f.queues[w] = q[n:]
	}
	if i := len(f.reqs) - f.cfg.InFlight; i >= 0 && i < len(f.reqs) {
		r := &f.reqs[i]
		if !r.done {
			f.finishPrefill(i)
			q := f.queues[r.worker]
			if k := indexOf(q, i); k >= 0 {
				f.queues[r.worker] = append(q[:k:k], q[k+1:]...)
			}
		}
		for _, l := range f.accounts(r) {
			l.Running--
			l.Blocks -= r.blocks
		}
		r.freed = true
		act := f.active[r.worker]
		for _, h := range r.chain {
			if act[h]--; act[h] <= 0 {
				delete(act, h)
			}
		}
		r.chain = nil
		freed = append(freed, i)
	}
	return done, freed
}

func (f *Fleet) finishPrefill(i int) {
	r := &f.reqs[i]
	r.done = true
	for _, l := range f.accounts(r) {
		l.Waiting--
		l.PrefillTokens -= r.prefill
	}
}

func indexOf(xs []int, x int) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// Book routes the next request (prompt tokens, cached of them found in the
// worker's cache) to worker w and returns its TTFT estimate in seconds:
// its prefill is done at Now() + the estimate.
func (f *Fleet) Book(w, prompt, cached int) float64 { return f.BookChain(w, prompt, cached, nil) }

// BookChain is Book with the request's block hashes, which count among
// worker w's active blocks until the request is freed (ActiveBlocks).
func (f *Fleet) BookChain(w, prompt, cached int, chain []uint64) float64 {
	return f.book(w, prompt, cached, chain, false)
}

func (f *Fleet) book(w, prompt, cached int, chain []uint64, outside bool) float64 {
	now := f.now()
	cached = min(cached, prompt)
	prefill := int64(prompt - cached)
	blocks := int64((prompt + f.cfg.BlockSize - 1) / f.cfg.BlockSize)
	start := max(now, f.freeAt[w])
	finish := start + float64(prefill)/f.cfg.PrefillRate
	f.freeAt[w] = finish
	f.reqs = append(f.reqs, fleetReq{worker: int32(w), prefill: prefill, blocks: blocks, finish: finish, chain: chain, outside: outside})
	for _, h := range chain {
		f.active[w][h]++
	}
	f.queues[w] = append(f.queues[w], len(f.reqs)-1)
	for _, l := range f.accounts(&f.reqs[len(f.reqs)-1]) {
		l.Running++
		l.Waiting++
		l.PrefillTokens += prefill
		l.Blocks += blocks
	}
	t := finish - now
	f.ttft = append(f.ttft, t)
	return t
}

// TTFT returns every booked request's estimate, in seconds, in order.
func (f *Fleet) TTFT() []float64 { return f.ttft }
