package loadgen

import (
	"fmt"
	"math"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// DefaultTransferPerToken is the disaggregated model's KV transfer time
// per prompt token, in seconds: 128 KiB of KV per token (an 8B-class model
// with grouped-query attention: 2 × 32 layers × 8 KV heads × 128 dims × 2
// bytes) over about 40 GB/s of effective RDMA bandwidth (NIXL on a 400
// Gb/s NIC) is 3.3 µs. Over TCP at about 3 GB/s it is some 44 µs — a third
// of the engine model's prefill cost per token (1/ModelPrefillRate =
// 100 µs), which is why --disagg-transfer-block is a flag.
const DefaultTransferPerToken = 3.3e-6

// DisaggConfig sizes the disaggregated engine model of one replay: a
// prefill pool and a decode pool, each with its own caches and prefill
// queues (fleet.go), and the KV transfer between them.
type DisaggConfig struct {
	Prefill, Decode int // pool sizes
	BlockSize       int // tokens per block
	Capacity        int // blocks per worker, both pools
	// InFlight: a request is freed InFlight requests after it arrived
	// (in both pools' models).
	InFlight int
	Gap      float64   // arrival interval, seconds (ArrivalGap)
	Arrivals []float64 // ArrivalTimes, or nil
	// TransferPerBlock is the seconds to move one KV block from the
	// prefill worker to the decode worker (DefaultTransferPerToken ×
	// block size by default).
	TransferPerBlock float64
	// Delay is when a worker's events reach the decider's view (delay.go):
	// the prefill worker's stored blocks, and the blocks a decode worker
	// received or prefilled itself.
	Delay EventDelay
}

// DisaggView is what a decider knows of one request at its arrival: the
// decode worker chosen (the same for every decider), the prompt tokens it
// holds, and per prefill worker the tokens it holds and its queued
// prefill tokens — the holdings as the delayed events showed them.
type DisaggView struct {
	Tokens        int
	BlockSize     int
	DecodeCached  int
	DecodeQueued  int64
	PrefillCached []int
	PrefillQueued []int64
}

// DisaggDecider is one policy of the split decision: whether to prefill
// on a prefill worker (and which) or locally on the decode worker.
type DisaggDecider interface {
	Name() string
	Decide(v DisaggView) (split bool, prefill int)
}

// DisaggTally is what a disaggregated replay measured.
type DisaggTally struct {
	Requests, Split int
	PromptTokens    int64
	// SavedTokens: prompt tokens not prefilled thanks to a cache hit on
	// the worker that prefilled them.
	SavedTokens int64
	// TransferBlocks: blocks moved from prefill to decode workers.
	TransferBlocks int64
	TTFT           []float64 // seconds, per request
}

// disaggPools is the replay's state: caches, engine models and the
// decider-side views of each pool.
type disaggPools struct {
	cfg            DisaggConfig
	pCache, dCache []*simengine.Cache
	pFleet, dFleet *Fleet
	pSeen, dSeen   *holders
	pDue, dDue     publishQueue[[]simengine.Event]
}

func newDisaggPools(cfg DisaggConfig) (*disaggPools, error) {
	if cfg.Prefill <= 0 || cfg.Decode <= 0 || !(cfg.TransferPerBlock >= 0) || math.IsInf(cfg.TransferPerBlock, 0) {
		return nil, fmt.Errorf("loadgen: disaggregated fleet %d:%d with transfer %v s/block out of range", cfg.Prefill, cfg.Decode, cfg.TransferPerBlock)
	}
	d := &disaggPools{cfg: cfg, pSeen: newHolders(cfg.Prefill), dSeen: newHolders(cfg.Decode)}
	var err error
	if d.pCache, err = newCaches(cfg.Prefill, cfg); err != nil {
		return nil, err
	}
	if d.dCache, err = newCaches(cfg.Decode, cfg); err != nil {
		return nil, err
	}
	fc := func(n int) FleetConfig {
		return FleetConfig{Workers: n, BlockSize: cfg.BlockSize, Capacity: cfg.Capacity, InFlight: cfg.InFlight,
			Gap: cfg.Gap, Arrivals: cfg.Arrivals, PrefillRate: ModelPrefillRate}
	}
	if d.pFleet, err = NewFleet(fc(cfg.Prefill)); err != nil {
		return nil, err
	}
	if d.dFleet, err = NewFleet(fc(cfg.Decode)); err != nil {
		return nil, err
	}
	return d, nil
}

func newCaches(n int, cfg DisaggConfig) ([]*simengine.Cache, error) {
	out := make([]*simengine.Cache, n)
	for i := range out {
		c, err := simengine.NewCache(simengine.Config{BlockSize: cfg.BlockSize, CapacityBlocks: cfg.Capacity})
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// ReplayDisagg serves reqs in order on a fresh disaggregated model with
// decider d. Every decider gets the same decode worker rule — the one
// finishing the request's local prefill first by what the delayed events
// show (queued + uncached tokens, then the lower index) — so the table
// compares split decisions alone. A split request is prefilled on the
// chosen prefill worker behind its queue, then its blocks the decode
// worker does not hold move at TransferPerBlock each: its TTFT is that
// prefill end plus the transfer, or the decode worker's own queue end when
// later. A local request is prefilled on the decode worker behind its
// queue.
func ReplayDisagg(reqs []Request, d DisaggDecider, cfg DisaggConfig) (DisaggTally, error) {
	m, err := newDisaggPools(cfg)
	if err != nil {
		return DisaggTally{}, err
	}
	var t DisaggTally
	for _, r := range reqs {
		m.pFleet.Advance()
		m.dFleet.Advance()
		now := m.dFleet.Now()
		_ = m.pDue.release(now, func(w int, ev []simengine.Event) error { m.pSeen.Apply(w, ev); return nil })
		_ = m.dDue.release(now, func(w int, ev []simengine.Event) error { m.dSeen.Apply(w, ev); return nil })
		sr := simengine.Request{Tokens: r.Tokens, SessionID: r.Session}
		chain := m.dCache[0].Hashes(sr, -1)
		v := m.view(len(r.Tokens), chain)
		dw, dcached := m.pickDecode(len(r.Tokens), chain)
		v.DecodeCached, v.DecodeQueued = dcached, m.dFleet.Load(dw).PrefillTokens
		split, pw := d.Decide(v)
		if split && (pw < 0 || pw >= cfg.Prefill) {
			return DisaggTally{}, fmt.Errorf("loadgen: decider %s picked prefill worker %d of %d", d.Name(), pw, cfg.Prefill)
		}
		prompt := len(r.Tokens)
		blocks := (prompt + cfg.BlockSize - 1) / cfg.BlockSize
		t.Requests++
		t.PromptTokens += int64(prompt)
		var ttft float64
		if split {
			pc, pev := m.pCache[pw].ServeRequest(sr)
			pt := m.pFleet.BookChain(pw, prompt, pc*cfg.BlockSize, chain)
			dc, dev := m.dCache[dw].ServeRequest(sr)
			moved := max(blocks-dc, 0)
			// The decode worker computes nothing: booked fully cached.
			dt := m.dFleet.BookChain(dw, prompt, prompt, chain)
			ttft = max(pt+float64(moved)*cfg.TransferPerBlock, dt)
			t.Split++
			t.SavedTokens += int64(min(pc*cfg.BlockSize, prompt))
			t.TransferBlocks += int64(moved)
			m.publish(&m.pDue, m.pSeen, pw, now, pt, pev)
			m.publish(&m.dDue, m.dSeen, dw, now, ttft, dev)
		} else {
			dc, dev := m.dCache[dw].ServeRequest(sr)
			ttft = m.dFleet.BookChain(dw, prompt, dc*cfg.BlockSize, chain)
			t.SavedTokens += int64(min(dc*cfg.BlockSize, prompt))
			m.publish(&m.dDue, m.dSeen, dw, now, ttft, dev)
		}
		t.TTFT = append(t.TTFT, ttft)
	}
	return t, nil
}

// view is the prefill pool as the delayed events and the model's queues
// show it for a request of tokens tokens.
func (m *disaggPools) view(tokens int, chain []uint64) DisaggView {
	v := DisaggView{Tokens: tokens, BlockSize: m.cfg.BlockSize,
		PrefillCached: make([]int, m.cfg.Prefill), PrefillQueued: make([]int64, m.cfg.Prefill)}
	depth, _ := m.pSeen.Match(chain)
	for w := range v.PrefillCached {
		v.PrefillCached[w] = min(depth[w]*m.cfg.BlockSize, tokens)
		v.PrefillQueued[w] = m.pFleet.Load(w).PrefillTokens
	}
	return v
}

// pickDecode is the decode worker and the prompt tokens it holds by the
// delayed events: the fewest queued plus uncached tokens, then the lower
// index.
func (m *disaggPools) pickDecode(tokens int, chain []uint64) (best, cached int) {
	depth, _ := m.dSeen.Match(chain)
	bestWork := int64(math.MaxInt64)
	for w := range m.cfg.Decode {
		c := min(depth[w]*m.cfg.BlockSize, tokens)
		if work := m.dFleet.Load(w).PrefillTokens + int64(tokens-c); work < bestWork {
			best, cached, bestWork = w, c, work
		}
	}
	return best, cached
}

// publish delivers a worker's events to the view at the delay model's
// time (now when it has none).
func (m *disaggPools) publish(q *publishQueue[[]simengine.Event], seen *holders, w int, now, ttft float64, ev []simengine.Event) {
	if at := m.cfg.Delay.publishAt(now, ttft); at < 0 {
		seen.Apply(w, ev)
	} else if len(ev) > 0 {
		q.push(at, w, ev)
	}
}
