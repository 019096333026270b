package loadgen

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// NameLLMD labels llm-d's inference scheduler as a baseline.
const NameLLMD = "llm-d"

// llm-d's precise-prefix-cache profile (deploy/config/
// epp-precise-prefix-cache-config.yaml): precise-prefix-cache-scorer 2,
// kv-cache-utilization-scorer 1, queue-scorer 1, then max-score-picker.
// The endpoint metrics (queue, KV usage) are polled every
// --refresh-metrics-interval (pkg/epp/server/options.go, 50 ms).
const (
	LLMDPrefixWeight = 2
	LLMDKVWeight     = 1
	LLMDQueueWeight  = 1
	LLMDPollInterval = 50 * time.Millisecond
)

// LLMD is llm-d's inference scheduler in its precise prefix-cache profile:
// the precise prefix scorer reads an exact index fed by the engines' KV
// events and scores each worker's longest cached prefix as matched blocks
// / the prompt's blocks (absoluteScoredPods, since v0.9.0; up to v0.8.0 it
// was min–max normalised across workers); the queue scorer gives
// (max − q) / (max − min) of the waiting queue q (1 for all when equal);
// the KV-cache-utilisation scorer 1 − usage. Queue and usage are what the
// last metrics poll saw (every LLMDPollInterval of the model's clock), not
// the state at the arrival: requests routed since the poll are not in them.
// The weighted sum's maximum wins, ties at random (the max-score picker
// shuffles first). The profile has no session-affinity scorer: llm-d runs
// without the session ids kvrouter gets.
type LLMD struct {
	idx      *holders
	rng      *rand.Rand
	score    []float64
	best     []int
	waiting  []int     // the last poll's queue per worker
	usage    []float64 // the last poll's KV usage per worker
	nextPoll float64   // model seconds; the first pick polls
}

// NewLLMD returns the scheduler over workers workers.
func NewLLMD(workers int, seed uint64) *LLMD {
	return &LLMD{idx: newHolders(workers), rng: rand.New(rand.NewPCG(seed, 0x6c6c6d64)), score: make([]float64, workers),
		waiting: make([]int, workers), usage: make([]float64, workers), nextPoll: math.Inf(-1)}
}

// Name implements Policy.
func (p *LLMD) Name() string { return NameLLMD }

// poll refreshes the metrics when a poll fell due since the last one. The
// engine model changes only at arrivals and prefill ends, so the state at
// the first arrival after a poll instant is the state the poll read, but
// for prefills that ended in between (which makes the poll slightly
// fresher than llm-d's, never staler).
func (p *LLMD) poll(f *Fleet) {
	now := f.Now()
	if now < p.nextPoll {
		return
	}
	for w := range f.Workers() {
		p.waiting[w], p.usage[w] = f.Load(w).Waiting, f.KVUsage(w)
	}
	step := LLMDPollInterval.Seconds()
	p.nextPoll = (math.Floor(now/step) + 1) * step
}

// Pick implements Policy.
func (p *LLMD) Pick(q Query) int {
	p.poll(q.Fleet)
	n := q.Fleet.Workers()
	qlo, qhi := p.waiting[0], p.waiting[0]
	for w := 1; w < n; w++ {
		qlo, qhi = min(qlo, p.waiting[w]), max(qhi, p.waiting[w])
	}
	for w := range n {
		qs := 1.0
		if qhi > qlo {
			qs = float64(qhi-p.waiting[w]) / float64(qhi-qlo)
		}
		p.score[w] = LLMDQueueWeight*qs + LLMDKVWeight*(1-p.usage[w])
	}
	if total := len(q.Chain); total > 0 {
		depth, hit := p.idx.Match(q.Chain)
		for _, w := range hit {
			p.score[w] += LLMDPrefixWeight * float64(depth[w]) / float64(total)
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
