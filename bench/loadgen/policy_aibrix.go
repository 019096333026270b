package loadgen

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// NameAIBrix labels AIBrix's prefix-cache router as a baseline.
const NameAIBrix = "aibrix"

// AIBrix defaults (pkg/plugins/gateway/algorithms/prefix_cache.go:
// AIBRIX_PREFIX_CACHE_POD_RUNNING_REQUEST_IMBALANCE_ABS_COUNT 8,
// AIBRIX_PREFIX_CACHE_STANDARD_DEVIATION_FACTOR 1).
const (
	AIBrixImbalanceAbsCount = 8
	AIBrixStdDevFactor      = 1
)

// AIBrix is AIBrix's prefix-cache routing algorithm (the gateway's
// prefix_cache.go, routeOriginal with the local indexer): a prefix hash
// table built from its own decisions (each routed prompt's blocks are
// added for the chosen pod) and the running-request count per pod. Its
// load-imbalance guard (getTargetPodListOnLoadImbalance): when max − min
// running > the abs count, only the pods with the fewest running requests
// are matched. Among the matched pods (percent = leading blocks held × 100
// / prompt blocks, integer; pkg/utils/prefixcacheindexer/hash.go), shuffled
// then sorted by decreasing percent then increasing running count, the
// first whose count ≤ mean + stddev_factor × stddev wins; with no match,
// or none under that bound, a pod with the fewest running requests, at
// random among equals (selectTargetPodWithLeastRequestCount). The table's
// own eviction (200,000 blocks, idle entries after an hour) is left out.
type AIBrix struct {
	table *holders
	rng   *rand.Rand
	allow []bool
	cand  []int
	least []int
}

// NewAIBrix returns the prefix-cache policy over workers workers.
func NewAIBrix(workers int, seed uint64) *AIBrix {
	return &AIBrix{table: newHolders(workers), rng: rand.New(rand.NewPCG(seed, 0x61696272)), allow: make([]bool, workers)}
}

// Name implements Policy.
func (p *AIBrix) Name() string { return NameAIBrix }

// Pick implements Policy.
func (p *AIBrix) Pick(q Query) int {
	return p.table.record(p.choose(q), q.Chain)
}

func (p *AIBrix) choose(q Query) int {
	f := q.Fleet
	n := f.Workers()
	run := func(w int) int { return f.Own(w).Running }
	lo, hi, sum, sq := run(0), run(0), 0.0, 0.0
	for w := range n {
		r := run(w)
		lo, hi = min(lo, r), max(hi, r)
		sum += float64(r)
		sq += float64(r) * float64(r)
	}
	mean := sum / float64(n)
	std := math.Sqrt(max(0, sq/float64(n)-mean*mean))
	gated := hi-lo > AIBrixImbalanceAbsCount
	p.least = p.least[:0]
	for w := range n {
		p.allow[w] = !gated || run(w) == lo
		if run(w) == lo {
			p.least = append(p.least, w)
		}
	}
	blocks := len(q.Chain)
	depth, hit := p.table.Match(q.Chain)
	p.cand = p.cand[:0]
	for _, w := range hit {
		if p.allow[w] {
			p.cand = append(p.cand, w)
		}
	}
	pct := func(w int) int { return depth[w] * 100 / max(blocks, 1) }
	p.rng.Shuffle(len(p.cand), func(i, j int) { p.cand[i], p.cand[j] = p.cand[j], p.cand[i] })
	slices.SortStableFunc(p.cand, func(a, b int) int {
		if c := cmp.Compare(pct(b), pct(a)); c != 0 {
			return c
		}
		return cmp.Compare(run(a), run(b))
	})
	for _, w := range p.cand {
		if float64(run(w)) <= mean+AIBrixStdDevFactor*std {
			return w
		}
	}
	return p.least[p.rng.IntN(len(p.least))]
}

// Observe implements Policy; the table follows decisions, not events.
func (p *AIBrix) Observe(int, []simengine.Event) {}
