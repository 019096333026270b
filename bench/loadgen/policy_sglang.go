package loadgen

import "github.com/kvrouter/kvrouter/bench/simengine"

// NameSGLang labels SGLang's cache-aware router as a baseline.
const NameSGLang = "sglang"

// SGLang defaults (the Shepherd Model Gateway's launch flags,
// model_gateway/src/main.rs: --cache-threshold 0.3,
// --balance-abs-threshold 64, --balance-rel-threshold 1.5; the KV-usage
// triggers default to 1.0, off).
const (
	SGLangCacheThreshold      = 0.3
	SGLangBalanceAbsThreshold = 64
	SGLangBalanceRelThreshold = 1.5
)

// SGLang is the cache_aware policy of SGLang's router, now the Shepherd
// Model Gateway (model_gateway/src/policies/cache_aware.rs), on its
// approximate token tree (no KV events): a radix tree per worker built
// from its own decisions (each routed prompt is inserted into the chosen
// worker's tree). The load is the router's count of in-flight requests per
// worker. The min-load worker is the one with the fewest in flight, ties
// broken by fewer requests processed (routed there so far), then the
// lower index. When the fleet is imbalanced — max − min >
// balance_abs_threshold and max > balance_rel_threshold × min — the
// request goes to the min-load worker; otherwise to the worker whose tree
// matches the longest prefix when the match covers more than
// cache_threshold of the prompt, else to the min-load worker. The tree
// matches tokens; here it matches the engine's blocks (the same prefix, in
// block steps). Among workers tied on the longest match the tree reports
// one tenant; here the lowest index. The tree's eviction (max_tree_size,
// every eviction_interval_secs) never triggers at these trace sizes and is
// left out.
type SGLang struct {
	tree      *holders
	processed []int
}

// NewSGLang returns the cache-aware policy over workers workers.
func NewSGLang(workers int) *SGLang {
	return &SGLang{tree: newHolders(workers), processed: make([]int, workers)}
}

// Name implements Policy.
func (p *SGLang) Name() string { return NameSGLang }

// Pick implements Policy.
func (p *SGLang) Pick(q Query) int {
	w := p.tree.record(p.choose(q), q.Chain)
	p.processed[w]++
	return w
}

func (p *SGLang) choose(q Query) int {
	n := q.Fleet.Workers()
	run := func(w int) int { return q.Fleet.Own(w).Running }
	lo, hi, least := run(0), run(0), 0
	for w := 1; w < n; w++ {
		r := run(w)
		if r < run(least) || (r == run(least) && p.processed[w] < p.processed[least]) {
			least = w
		}
		lo, hi = min(lo, r), max(hi, r)
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
	return least
}

// Observe implements Policy; the tree follows decisions, not events.
func (p *SGLang) Observe(int, []simengine.Event) {}
