package loadgen

import "github.com/kvrouter/kvrouter/bench/simengine"

// NameSGLang labels SGLang's cache-aware router as a baseline.
const NameSGLang = "sglang"

// SGLang defaults (sgl-router's CacheAware policy config and launch_router
// flags: --cache-threshold 0.3, --balance-abs-threshold 64,
// --balance-rel-threshold 1.5).
const (
	SGLangCacheThreshold      = 0.3
	SGLangBalanceAbsThreshold = 64
	SGLangBalanceRelThreshold = 1.5
)

// SGLang is the cache_aware policy of SGLang's router (sgl-router,
// src/policies/cache_aware.rs): it keeps an approximate radix tree per
// worker built from its own decisions (each routed prompt is inserted into
// the chosen worker's tree; no engine events). The load is the router's
// count of in-flight requests per worker. When the fleet is imbalanced —
// max − min > balance_abs_threshold and max > balance_rel_threshold × min
// — it sends the request to the worker with the fewest in flight;
// otherwise to the worker whose tree matches the longest prefix if the
// match covers more than cache_threshold of the prompt, else to the worker
// with the smallest tree. The tree matches text; here it matches the
// engine's blocks (the same prefix, in block steps). Ties go to the lowest
// worker index (the source takes the first entry of a hash map). The
// tree's eviction (max_tree_size 2^26 characters, every 120 s) never
// triggers at these trace sizes and is left out.
type SGLang struct {
	tree *holders
}

// NewSGLang returns the cache-aware policy over workers workers.
func NewSGLang(workers int) *SGLang { return &SGLang{tree: newHolders(workers)} }

// Name implements Policy.
func (p *SGLang) Name() string { return NameSGLang }

// Pick implements Policy.
func (p *SGLang) Pick(q Query) int {
	return p.tree.record(p.choose(q), q.Chain)
}

func (p *SGLang) choose(q Query) int {
	n := q.Fleet.Workers()
	lo, hi, least := q.Fleet.Load(0).Running, q.Fleet.Load(0).Running, 0
	for w := 1; w < n; w++ {
		r := q.Fleet.Load(w).Running
		if r < lo {
			lo, least = r, w
		}
		hi = max(hi, r)
	}
	if hi-lo > SGLangBalanceAbsThreshold && float64(hi) > SGLangBalanceRelThreshold*float64(lo) {
		return least
	}
	depth, hit := p.tree.Match(q.Chain)
	best, top := -1, 0
	for _, w := range hit {
		if depth[w] > top {
			best, top = w, depth[w]
		}
	}
	if best >= 0 && q.Tokens > 0 && float64(top*q.BlockSize)/float64(q.Tokens) > SGLangCacheThreshold {
		return best
	}
	smallest := 0
	for w := 1; w < n; w++ {
		if p.tree.size[w] < p.tree.size[smallest] {
			smallest = w
		}
	}
	return smallest
}

// Observe implements Policy; the tree follows decisions, not events.
func (p *SGLang) Observe(int, []simengine.Event) {}
