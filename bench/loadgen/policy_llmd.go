package loadgen

import (
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// NameLLMD labels llm-d's inference scheduler as a baseline.
const NameLLMD = "llm-d"

// llm-d's scorer weights in its precise-prefix-cache-aware guide
// (guides/precise-prefix-cache-aware/gaie-kv-events/values.yaml):
// precise-prefix-cache-scorer 3, kv-cache-utilization-scorer 2,
// queue-scorer 2, then max-score-picker.
const (
	LLMDPrefixWeight = 3
	LLMDKVWeight     = 2
	LLMDQueueWeight  = 2
)

// LLMD is llm-d's inference scheduler in its precise prefix-cache
// configuration: the precise prefix scorer reads an exact index fed by the
// engines' KV events and scores each worker's longest cached prefix in
// blocks, min-max normalised over the workers that hold at least one
// block (1 when they all hold the same, 0 for the others;
// indexedScoresToNormalizedScoredPods); the queue scorer gives
// (max − q) / (max − min) of the waiting queue q (1 for all when equal);
// the KV-cache-utilisation scorer 1 − usage. The weighted sum's maximum
// wins, ties at random (the max-score picker shuffles first).
type LLMD struct {
	idx   *holders
	rng   *rand.Rand
	score []float64
	best  []int
}

// NewLLMD returns the scheduler over workers workers.
func NewLLMD(workers int, seed uint64) *LLMD {
	return &LLMD{idx: newHolders(workers), rng: rand.New(rand.NewPCG(seed, 0x6c6c6d64)), score: make([]float64, workers)}
}

// Name implements Policy.
func (p *LLMD) Name() string { return NameLLMD }

// Pick implements Policy.
func (p *LLMD) Pick(q Query) int {
	f := q.Fleet
	n := f.Workers()
	qlo, qhi := f.Load(0).Waiting, f.Load(0).Waiting
	for w := 1; w < n; w++ {
		qlo, qhi = min(qlo, f.Load(w).Waiting), max(qhi, f.Load(w).Waiting)
	}
	for w := range n {
		qs := 1.0
		if qhi > qlo {
			qs = float64(qhi-f.Load(w).Waiting) / float64(qhi-qlo)
		}
		p.score[w] = LLMDQueueWeight*qs + LLMDKVWeight*(1-f.KVUsage(w))
	}
	depth, hit := p.idx.Match(q.Chain)
	if len(hit) > 0 {
		lo, hi := depth[hit[0]], depth[hit[0]]
		for _, w := range hit {
			lo, hi = min(lo, depth[w]), max(hi, depth[w])
		}
		for _, w := range hit {
			s := 1.0
			if hi > lo {
				s = float64(depth[w]-lo) / float64(hi-lo)
			}
			p.score[w] += LLMDPrefixWeight * s
		}
	}
	p.best = p.best[:0]
	for w := range n {
		switch {
		case len(p.best) == 0 || p.score[w] > p.score[p.best[0]]:
			p.best = append(p.best[:0], w)
		case p.score[w] == p.score[p.best[0]]:
			p.best = append(p.best, w)
		}
	}
	return p.best[p.rng.IntN(len(p.best))]
}

// Observe implements Policy: the index follows the engine's events.
func (p *LLMD) Observe(worker int, events []simengine.Event) { p.idx.Apply(worker, events) }
