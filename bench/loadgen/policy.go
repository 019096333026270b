package loadgen

import (
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// Policy chooses the worker of each request in an offline replay, where
// every worker is a simengine.Cache with the same hash seed (so a prefix has
// the same engine hashes on every worker). Each policy is a plain value for
// one goroutine; with its seed, it picks the same workers on every run.
type Policy interface {
	// Name labels the policy in reports.
	Name() string
	// Pick returns the worker (0 ≤ w < workers) for the request q.
	Pick(q Query) int
	// Observe is told the events serving the request on worker caused
	// (the engine's KV events: event-fed policies apply them; policies
	// that track their own decisions ignore them).
	Observe(worker int, events []simengine.Event)
}

// Query is what a policy knows of one request when it picks.
type Query struct {
	// Chain is the engine hash chain of the request's complete blocks.
	Chain []uint64
	// Tokens is the prompt length in tokens; BlockSize the tokens per block.
	Tokens, BlockSize int
	// Fleet is the engine model's load at the request's arrival (read only).
	Fleet *Fleet
}

// Policy names, as reports show them.
const (
	NameKVRouter    = "kvrouter"
	NameRandom      = "random"
	NameRoundRobin  = "round-robin"
	NameClairvoyant = "clairvoyant"
	NameGreedy      = "exact-greedy"
)

// Random picks a worker uniformly at random (seeded).
type Random struct {
	n   int
	rng *rand.Rand
}

// NewRandom returns a Random policy over workers workers.
func NewRandom(workers int, seed uint64) *Random {
	return &Random{n: workers, rng: rand.New(rand.NewPCG(seed, 0x72616e64))}
}

// Name implements Policy.
func (p *Random) Name() string { return NameRandom }

// Pick implements Policy.
func (p *Random) Pick(Query) int { return p.rng.IntN(p.n) }

// Observe implements Policy; Random ignores what happened.
func (p *Random) Observe(int, []simengine.Event) {}

// RoundRobin cycles through the workers in order.
type RoundRobin struct{ n, next int }

// NewRoundRobin returns a RoundRobin policy over workers workers.
func NewRoundRobin(workers int) *RoundRobin { return &RoundRobin{n: workers} }

// Name implements Policy.
func (p *RoundRobin) Name() string { return NameRoundRobin }

// Pick implements Policy.
func (p *RoundRobin) Pick(Query) int {
	w := p.next
	p.next = (p.next + 1) % p.n
	return w
}

// Observe implements Policy; RoundRobin ignores what happened.
func (p *RoundRobin) Observe(int, []simengine.Event) {}

// Greedy knows every cache exactly (it follows their events without loss
// or delay) and ignores load: it picks a worker holding the longest cached
// prefix of the request, breaking ties (including "nobody holds anything")
// uniformly at random. On a trace whose requests share a system prompt it
// sends everything to the first worker that cached it — the greedy reading
// of "clairvoyant, ignores load", shown next to the bound (ReplayClairvoyant).
type Greedy struct {
	n    int
	rng  *rand.Rand
	idx  *holders
	best []int
}

// NewGreedy returns a Greedy policy over workers workers.
func NewGreedy(workers int, seed uint64) *Greedy {
	return &Greedy{n: workers, rng: rand.New(rand.NewPCG(seed, 0x636c6169)), idx: newHolders(workers)}
}

// Name implements Policy.
func (p *Greedy) Name() string { return NameGreedy }

// Pick implements Policy.
func (p *Greedy) Pick(q Query) int {
	depth, hit := p.idx.Match(q.Chain)
	p.best = p.best[:0]
	top := 0
	for _, w := range hit {
		switch d := depth[w]; {
		case d > top:
			top, p.best = d, append(p.best[:0], w)
		case d == top:
			p.best = append(p.best, w)
		}
	}
	if len(p.best) == 0 {
		return p.rng.IntN(p.n)
	}
	return p.best[p.rng.IntN(len(p.best))]
}

// Observe implements Policy: it applies the worker's cache events.
func (p *Greedy) Observe(worker int, events []simengine.Event) { p.idx.Apply(worker, events) }
