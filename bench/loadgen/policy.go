package loadgen

import (
	"math/rand/v2"
	"slices"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// Policy chooses the worker of each request in an offline replay, where
// every worker is a simengine.Cache with the same hash seed (so a prefix has
// the same engine hashes on every worker).
type Policy interface {
	// Name labels the policy in reports.
	Name() string
	// Pick returns the worker (0 ≤ w < workers) for a request whose complete
	// blocks have the engine hash chain chain.
	Pick(chain []uint64) int
	// Observe is told the events serving the request on worker caused.
	Observe(worker int, events []simengine.Event)
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
func (p *Random) Pick([]uint64) int { return p.rng.IntN(p.n) }

// Observe implements Policy; Random ignores what happened.
func (p *Random) Observe(int, []simengine.Event) {}

// RoundRobin cycles through the workers in order.
type RoundRobin struct{ n, next int }

// NewRoundRobin returns a RoundRobin policy over workers workers.
func NewRoundRobin(workers int) *RoundRobin { return &RoundRobin{n: workers} }

// Name implements Policy.
func (p *RoundRobin) Name() string { return NameRoundRobin }

// Pick implements Policy.
func (p *RoundRobin) Pick([]uint64) int {
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
	n        int
	rng      *rand.Rand
	holders  map[uint64][]int32 // engine hash → workers holding it
	cur, nxt []int32
}

// NewGreedy returns a Greedy policy over workers workers.
func NewGreedy(workers int, seed uint64) *Greedy {
	return &Greedy{n: workers, rng: rand.New(rand.NewPCG(seed, 0x636c6169)), holders: map[uint64][]int32{}}
}

// Name implements Policy.
func (p *Greedy) Name() string { return NameGreedy }

// Pick implements Policy.
func (p *Greedy) Pick(chain []uint64) int {
	p.cur = p.cur[:0]
	for depth, h := range chain {
		hs := p.holders[h]
		p.nxt = p.nxt[:0]
		for _, w := range hs {
			if depth == 0 || slices.Contains(p.cur, w) {
				p.nxt = append(p.nxt, w)
			}
		}
		if len(p.nxt) == 0 {
			break
		}
		p.cur, p.nxt = p.nxt, p.cur
	}
	if len(p.cur) == 0 {
		return p.rng.IntN(p.n)
	}
	slices.Sort(p.cur) // holders lists are in event order; make ties independent of it
	return int(p.cur[p.rng.IntN(len(p.cur))])
}

// Observe implements Policy: it applies the worker's cache events.
func (p *Greedy) Observe(worker int, events []simengine.Event) {
	w := int32(worker)
	for _, ev := range events {
		switch ev.Kind {
		case simengine.EventStored:
			for _, h := range ev.Hashes {
				if !slices.Contains(p.holders[h], w) {
					p.holders[h] = append(p.holders[h], w)
				}
			}
		case simengine.EventRemoved:
			for _, h := range ev.Hashes {
				p.drop(h, w)
			}
		case simengine.EventCleared:
			for h := range p.holders {
				p.drop(h, w)
			}
		}
	}
}

func (p *Greedy) drop(h uint64, w int32) {
	hs := p.holders[h]
	if i := slices.Index(hs, w); i >= 0 {
		hs = slices.Delete(hs, i, i+1)
		if len(hs) == 0 {
			delete(p.holders, h)
		} else {
			p.holders[h] = hs
		}
	}
}
