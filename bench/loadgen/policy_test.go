package loadgen

import (
	"math"
	"testing"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

func TestRoundRobinCycles(t *testing.T) {
	p := NewRoundRobin(3)
	for i, want := range []int{0, 1, 2, 0, 1} {
		if got := p.Pick(Query{}); got != want {
			t.Fatalf("pick %d = %d, want %d", i, got, want)
		}
	}
}

func TestRandomIsSeededAndInRange(t *testing.T) {
	a, b := NewRandom(5, 7), NewRandom(5, 7)
	seen := map[int]bool{}
	for range 200 {
		x, y := a.Pick(Query{}), b.Pick(Query{})
		if x != y {
			t.Fatal("same seed, different picks")
		}
		if x < 0 || x >= 5 {
			t.Fatalf("pick %d out of range", x)
		}
		seen[x] = true
	}
	if len(seen) != 5 {
		t.Errorf("200 picks reached %d of 5 workers", len(seen))
	}
}

func stored(hashes ...uint64) []simengine.Event {
	return []simengine.Event{{Kind: simengine.EventStored, Hashes: hashes}}
}

func TestGreedyPicksLongestCachedPrefix(t *testing.T) {
	p := NewGreedy(4, 1)
	p.Observe(0, stored(10, 11))
	p.Observe(2, stored(10, 11, 12))
	p.Observe(3, stored(20))
	for _, c := range []struct {
		chain []uint64
		want  []int
	}{
		{[]uint64{10, 11, 12, 13}, []int{2}},
		{[]uint64{10, 11, 99}, []int{0, 2}}, // tie at depth 2
		{[]uint64{20, 21}, []int{3}},
		{[]uint64{30, 31}, []int{0, 1, 2, 3}}, // nothing held: any worker
	} {
		got := map[int]bool{}
		for range 100 {
			got[p.Pick(Query{Chain: c.chain})] = true
		}
		if len(got) != len(c.want) {
			t.Errorf("chain %v: picked %v, want each of %v", c.chain, got, c.want)
		}
		for _, w := range c.want {
			if !got[w] {
				t.Errorf("chain %v: never picked %d (picked %v)", c.chain, w, got)
			}
		}
	}
}

func TestGreedyFollowsRemovesAndClears(t *testing.T) {
	p := NewGreedy(3, 1)
	p.Observe(1, stored(1, 2, 3))
	p.Observe(2, stored(1, 2))
	p.Observe(1, []simengine.Event{{Kind: simengine.EventRemoved, Hashes: []uint64{3}}, {Kind: simengine.EventRemoved, Hashes: []uint64{2}}})
	// now worker 1 holds [1], worker 2 holds [1 2]
	for range 20 {
		if got := p.Pick(Query{Chain: []uint64{1, 2, 3}}); got != 2 {
			t.Fatalf("after removes: picked %d, want 2", got)
		}
	}
	p.Observe(2, []simengine.Event{{Kind: simengine.EventCleared}})
	for range 20 {
		if got := p.Pick(Query{Chain: []uint64{1, 2}}); got != 1 {
			t.Fatalf("after clear: picked %d, want 1", got)
		}
	}
	if len(p.idx.by[2]) != 0 || len(p.idx.by[3]) != 0 || p.idx.size[1] != 1 || p.idx.size[2] != 0 {
		t.Errorf("holders not dropped: %v, sizes %v", p.idx.by, p.idx.size)
	}
}

// Two requests with the same prompt: the second is a full hit when routed
// to the first's worker (greedy, and the clairvoyant bound), maybe not with
// round robin.
func TestReplayOfflineTallies(t *testing.T) {
	prompt := make([]uint32, 40) // 2 complete blocks of 16 + 8 tokens
	for i := range prompt {
		prompt[i] = uint32(i)
	}
	reqs := []Request{{Tokens: prompt}, {Tokens: prompt}, {Tokens: prompt}}
	cc := CacheConfig{Workers: 2, BlockSize: 16, Capacity: 64}
	rr, err := ReplayOffline(reqs, NewRoundRobin(2), cc)
	if err != nil {
		t.Fatal(err)
	}
	// rr: worker 0 miss, worker 1 miss, worker 0 hit (32 of 40 tokens)
	if rr.PromptTokens != 120 || rr.CachedTokens != 32 || rr.Requests[0] != 2 || rr.Requests[1] != 1 {
		t.Errorf("round robin tally %+v", rr)
	}
	g, err := ReplayOffline(reqs, NewGreedy(2, 3), cc)
	if err != nil {
		t.Fatal(err)
	}
	if g.CachedTokens != 64 {
		t.Errorf("greedy cached %d tokens, want 64 (two full-block hits)", g.CachedTokens)
	}
	cv, err := ReplayClairvoyant(reqs, cc)
	if err != nil {
		t.Fatal(err)
	}
	if cv.CachedTokens != 64 || cv.Requests[0] != 3 || len(cv.Requests) != 2 {
		t.Errorf("clairvoyant tally %+v", cv)
	}
	if math.Abs(cv.RequestCoV()-1) > 1e-12 { // {3, 0}: σ 1.5, mean 1.5
		t.Errorf("clairvoyant request CoV %v, want 1", cv.RequestCoV())
	}
	if _, err := ReplayOffline(reqs, NewRoundRobin(3), cc); err == nil {
		t.Error("a policy picking a worker outside the fleet was accepted")
	}
}

// The clairvoyant bound pools capacity: when the pooled cache holds the
// working set (3 prompts of 4 blocks, 16 pooled blocks) every repeat is a
// hit, which no policy over two caches of 8 blocks beats.
func TestClairvoyantBoundsTheBaselines(t *testing.T) {
	var reqs []Request
	for range 3 {
		for p := range 3 {
			tok := make([]uint32, 64)
			for i := range tok {
				tok[i] = uint32(p*1000 + i)
			}
			reqs = append(reqs, Request{Tokens: tok})
		}
	}
	cc := CacheConfig{Workers: 2, BlockSize: 16, Capacity: 8}
	bound, _ := ReplayClairvoyant(reqs, cc)
	if want := 2.0 / 3; math.Abs(bound.HitRate()-want) > 1e-12 {
		t.Errorf("bound hit rate %.3f, want %.3f (every repeat)", bound.HitRate(), want)
	}
	for _, p := range []Policy{NewRoundRobin(2), NewRandom(2, 1), NewGreedy(2, 1)} {
		t2, err := ReplayOffline(reqs, p, cc)
		if err != nil {
			t.Fatal(err)
		}
		if t2.HitRate() > bound.HitRate() {
			t.Errorf("%s hit rate %.3f above the bound %.3f", p.Name(), t2.HitRate(), bound.HitRate())
		}
	}
}
