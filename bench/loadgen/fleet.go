package loadgen

import (
	"fmt"
	"math"
)

// The engine model behind the quality replays' load and TTFT estimate
// (bench/README.md, "Engine model"): request i arrives at i × Gap seconds;
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

// fleetReq is one booked request of the model.
type fleetReq struct {
	worker          int32
	done, freed     bool
	prefill, blocks int64
	finish          float64
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
}

// NewFleet returns an idle fleet.
func NewFleet(cfg FleetConfig) (*Fleet, error) {
	if cfg.Workers <= 0 || cfg.BlockSize <= 0 || cfg.Capacity <= 0 || cfg.InFlight < 0 ||
		cfg.Gap < 0 || !(cfg.PrefillRate > 0) || math.IsInf(cfg.PrefillRate, 0) {
		return nil, fmt.Errorf("loadgen: fleet config %+v out of range", cfg)
	}
	return &Fleet{cfg: cfg, loads: make([]WorkerLoad, cfg.Workers), freeAt: make([]float64, cfg.Workers),
		queues: make([][]int, cfg.Workers)}, nil
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

// now is the arrival time of the next request.
func (f *Fleet) now() float64 { return float64(len(f.reqs)) * f.cfg.Gap }

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
		l := &f.loads[r.worker]
		l.Running--
		l.Blocks -= r.blocks
		r.freed = true
		freed = append(freed, i)
	}
	return done, freed
}

func (f *Fleet) finishPrefill(i int) {
	r := &f.reqs[i]
	r.done = true
	l := &f.loads[r.worker]
	l.Waiting--
	l.PrefillTokens -= r.prefill
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
// worker's cache) to worker w and returns its TTFT estimate in seconds.
func (f *Fleet) Book(w, prompt, cached int) float64 {
	now := f.now()
	cached = min(cached, prompt)
	prefill := int64(prompt - cached)
	blocks := int64((prompt + f.cfg.BlockSize - 1) / f.cfg.BlockSize)
	start := max(now, f.freeAt[w])
	finish := start + float64(prefill)/f.cfg.PrefillRate
	f.freeAt[w] = finish
	f.reqs = append(f.reqs, fleetReq{worker: int32(w), prefill: prefill, blocks: blocks, finish: finish})
	f.queues[w] = append(f.queues[w], len(f.reqs)-1)
	l := &f.loads[w]
	l.Running++
	l.Waiting++
	l.PrefillTokens += prefill
	l.Blocks += blocks
	t := finish - now
	f.ttft = append(f.ttft, t)
	return t
}

// TTFT returns every booked request's estimate, in seconds, in order.
func (f *Fleet) TTFT() []float64 { return f.ttft }
