package loadgen

import (
	"fmt"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// Tally counts what a replay served: prompt and cached tokens, and the
// requests and prefill (uncached) tokens of each worker.
type Tally struct {
	PromptTokens int   `json:"prompt_tokens"`
	CachedTokens int   `json:"cached_tokens"`
	Requests     []int `json:"requests_per_worker"`
	Prefill      []int `json:"prefill_tokens_per_worker"`
	// TTFT is each request's time to first token in the engine model, in
	// seconds (fleet.go; none for the clairvoyant bound).
	TTFT []float64 `json:"-"`
	// OutsideTTFT is the outside requests' (outside.go), in seconds.
	OutsideTTFT []float64 `json:"-"`
}

// NewTally returns an empty tally over workers workers.
func NewTally(workers int) Tally {
	return Tally{Requests: make([]int, workers), Prefill: make([]int, workers)}
}

// Add counts one request of prompt tokens, cached of them already cached,
// served by worker.
func (t *Tally) Add(worker, prompt, cached int) {
	cached = min(cached, prompt)
	t.PromptTokens += prompt
	t.CachedTokens += cached
	t.Requests[worker]++
	t.Prefill[worker] += prompt - cached
}

// HitRate is cached tokens over prompt tokens (0 with no tokens).
func (t *Tally) HitRate() float64 {
	if t.PromptTokens == 0 {
		return 0
	}
	return float64(t.CachedTokens) / float64(t.PromptTokens)
}

// RequestCoV is the coefficient of variation of requests per worker.
func (t *Tally) RequestCoV() float64 { return CoV(floats(t.Requests)) }

// PrefillCoV is the coefficient of variation of prefill tokens per worker.
func (t *Tally) PrefillCoV() float64 { return CoV(floats(t.Prefill)) }

func floats(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// CacheConfig sizes the simulated workers of a replay and its engine
// model (fleet.go).
type CacheConfig struct {
	Workers   int
	BlockSize int // tokens per block
	Capacity  int // blocks per worker
	// InFlight: a request is freed InFlight requests after it arrived.
	InFlight int
	// Gap is the engine model's arrival interval in seconds (ArrivalGap).
	Gap float64
	// Arrivals, when set, are the requests' own arrival times in seconds
	// (ArrivalTimes: a workload with bursts).
	Arrivals []float64
	// Delay is when a request's events reach a policy (delay.go).
	Delay EventDelay
}

// fleet returns the engine model of cfg.
func (cfg CacheConfig) fleet() (*Fleet, error) {
	return NewFleet(FleetConfig{Workers: cfg.Workers, BlockSize: cfg.BlockSize, Capacity: cfg.Capacity, InFlight: cfg.InFlight,
		Gap: cfg.Gap, Arrivals: cfg.Arrivals, PrefillRate: ModelPrefillRate})
}

// ReplayOffline serves reqs in order on fresh simulated caches — no
// sockets, no router — each on the worker p picks, with the engine model's
// load at its arrival, and tallies the tokens each cache found already
// cached and the model's TTFT. Every cache has hash seed 0, so the chain p
// sees is valid on every worker. The cache serves a request when it is
// routed (its worker prefills first come first served, so a later request
// there finds its blocks); p observes the events at the publish time of
// cfg.Delay.
func ReplayOffline(reqs []Request, p Policy, cfg CacheConfig) (Tally, error) {
	return ReplayMixed(Routed(reqs), p, cfg)
}

// ReplayMixed is ReplayOffline with outside requests (outside.go): each
// is served on its own worker, booked on the engine model as outside
// load, and its events reach p like any other's; the tally counts the
// routed requests (their TTFT in TTFT, the outside ones' in OutsideTTFT).
func ReplayMixed(reqs []Arrival, p Policy, cfg CacheConfig) (Tally, error) {
	if cfg.Workers <= 0 {
		return Tally{}, fmt.Errorf("loadgen: %d workers, want > 0", cfg.Workers)
	}
	caches := make([]*simengine.Cache, cfg.Workers)
	for i := range caches {
		c, err := simengine.NewCache(simengine.Config{BlockSize: cfg.BlockSize, CapacityBlocks: cfg.Capacity})
		if err != nil {
			return Tally{}, err
		}
		caches[i] = c
	}
	fleet, err := cfg.fleet()
	if err != nil {
		return Tally{}, err
	}
	t := NewTally(cfg.Workers)
	var due publishQueue[[]simengine.Event]
	observe := func(w int, events []simengine.Event) error { p.Observe(w, events); return nil }
	for _, r := range reqs {
		fleet.Advance()
		now := fleet.Now()
		_ = due.release(now, observe)
		sr := simengine.Request{Tokens: r.Tokens, SessionID: r.Session}
		chain := caches[0].Hashes(sr, -1)
		if r.Outside {
			if r.Worker < 0 || r.Worker >= cfg.Workers {
				return Tally{}, fmt.Errorf("loadgen: outside request for worker %d of %d", r.Worker, cfg.Workers)
			}
			cached, events := caches[r.Worker].ServeRequest(sr)
			ttft := fleet.BookOutside(r.Worker, len(r.Tokens), cached*cfg.BlockSize)
			t.OutsideTTFT = append(t.OutsideTTFT, ttft)
			if at := cfg.Delay.publishAt(now, ttft); at < 0 {
				p.Observe(r.Worker, events)
			} else if len(events) > 0 {
				due.push(at, r.Worker, events)
			}
			continue
		}
		w := p.Pick(Query{Chain: chain, Tokens: len(r.Tokens), BlockSize: cfg.BlockSize, Fleet: fleet})
		if w < 0 || w >= cfg.Workers {
			return Tally{}, fmt.Errorf("loadgen: policy %s picked worker %d of %d", p.Name(), w, cfg.Workers)
		}
		cached, events := caches[w].ServeRequest(sr)
		t.Add(w, len(r.Tokens), cached*cfg.BlockSize)
		ttft := fleet.BookChain(w, len(r.Tokens), cached*cfg.BlockSize, chain)
		t.TTFT = append(t.TTFT, ttft)
		if at := cfg.Delay.publishAt(now, ttft); at < 0 {
			p.Observe(w, events)
		} else if len(events) > 0 {
			due.push(at, w, events)
		}
	}
	return t, nil
}

// ReplayClairvoyant is the clairvoyant bound: a router that knows every
// cache exactly and ignores load can do no better than if the fleet were
// one cache of the fleet's total capacity that every request reaches
// (nothing duplicated, nothing spread for balance). It serves reqs on one
// LRU cache of Workers × Capacity blocks and tallies every request on
// worker 0 of Workers — ignoring load is its whole point. LRU is not an
// optimal replacement policy, so this is the bound for LRU caches; once
// the pooled capacity holds the trace's working set it is the reuse bound
// (every block seen before is a hit).
func ReplayClairvoyant(reqs []Request, cfg CacheConfig) (Tally, error) {
	pooled, err := ReplayOffline(reqs, NewRoundRobin(1), CacheConfig{Workers: 1, BlockSize: cfg.BlockSize, Capacity: cfg.Workers * cfg.Capacity, InFlight: cfg.InFlight, Gap: cfg.Gap, Arrivals: cfg.Arrivals})
	pooled.TTFT = nil // one pooled cache: no fleet to queue on
	if err != nil || cfg.Workers <= 1 {
		return pooled, err
	}
	t := NewTally(cfg.Workers)
	t.PromptTokens, t.CachedTokens, t.Requests[0], t.Prefill[0] = pooled.PromptTokens, pooled.CachedTokens, pooled.Requests[0], pooled.Prefill[0]
	return t, nil
}
