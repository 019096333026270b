package loadgen

import (
	"fmt"
	"math"
	"testing"

	"github.com/kvrouter/kvrouter/actors/routing"
)

// fleetWith returns a fleet of len(running) workers (block size 16,
// capacity 100 blocks, nothing freed) whose worker w runs running[w]
// one-block requests of 16 uncached tokens, all still waiting.
func fleetWith(t *testing.T, running ...int) *Fleet {
	t.Helper()
	f, err := NewFleet(FleetConfig{Workers: len(running), BlockSize: 16, Capacity: 100, InFlight: 1 << 20, Gap: 0, PrefillRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	for w, n := range running {
		for range n {
			f.Advance()
			f.Book(w, 16, 0)
		}
	}
	f.Advance()
	return f
}

// peerPick gives p's index idx the held blocks, then asks p for a
// request of tokens tokens with chain on a fleet running running.
func peerPick(t *testing.T, p Policy, idx *holders, held map[int][]uint64, running []int, tokens int, chain []uint64) int {
	t.Helper()
	for w, hs := range held {
		idx.Add(w, hs)
	}
	return p.Pick(Query{Chain: chain, Tokens: tokens, BlockSize: 16, Fleet: fleetWith(t, running...)})
}

func TestFleetQueuesPrefillAndFrees(t *testing.T) {
	// Arrivals 1 s apart, 10 tokens/s: a 20-token prefill takes 2 s.
	f, err := NewFleet(FleetConfig{Workers: 2, BlockSize: 10, Capacity: 10, InFlight: 3, Gap: 1, PrefillRate: 10})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		w, prompt, cached int
		ttft              float64
		done, freed       []int
	}{
		{0, 20, 0, 2, nil, nil},              // t=0: done at 2
		{0, 20, 10, 2, nil, nil},             // t=1: waits 1 s, 1 s of prefill → done at 3
		{1, 30, 30, 0, []int{0}, nil},        // t=2: q0 done; fully cached
		{1, 10, 0, 1, []int{1, 2}, []int{0}}, // t=3: q1 and q2 done (q0 was at t=2); q0 freed
	}
	for i, s := range steps {
		done, freed := f.Advance()
		if fmt.Sprint(done, freed) != fmt.Sprint(s.done, s.freed) {
			t.Errorf("step %d: done %v freed %v, want %v %v", i, done, freed, s.done, s.freed)
		}
		if got := f.Book(s.w, s.prompt, s.cached); math.Abs(got-s.ttft) > 1e-9 {
			t.Errorf("step %d: ttft %v, want %v", i, got, s.ttft)
		}
	}
	if l := f.Load(0); l.Running != 1 || l.Waiting != 0 || l.Blocks != 2 || l.PrefillTokens != 0 {
		t.Errorf("worker 0 load %+v, want 1 running (q1, 2 blocks), none waiting", l)
	}
	if l := f.Load(1); l.Running != 2 || l.Waiting != 1 || l.PrefillTokens != 10 {
		t.Errorf("worker 1 load %+v, want 2 running, q3 waiting with 10 tokens", l)
	}
	if _, err := NewFleet(FleetConfig{Workers: 1, BlockSize: 1, Capacity: 1}); err == nil {
		t.Error("zero prefill rate accepted")
	}
}

func TestHoldersMatchLeadingBlocks(t *testing.T) {
	h := newHolders(3)
	h.Add(0, []uint64{1, 2, 3})
	h.Add(1, []uint64{1, 9})
	h.Add(2, []uint64{2, 3}) // no block 0: matches nothing
	depth, hit := h.Match([]uint64{1, 2, 3, 4})
	if len(hit) != 2 || hit[0] != 0 || hit[1] != 1 || depth[0] != 3 || depth[1] != 1 || depth[2] != 0 {
		t.Fatalf("match: depth %v hit %v", depth, hit)
	}
	depth, hit = h.Match([]uint64{5})
	if len(hit) != 0 || depth[0] != 0 || depth[1] != 0 {
		t.Fatalf("second match kept old depths: %v %v", depth, hit)
	}
}

func TestSGLangRules(t *testing.T) {
	chain := []uint64{1, 2, 3, 4} // 64 tokens
	for _, c := range []struct {
		name    string
		running []int
		tree    map[int][]uint64
		tokens  int
		want    int
	}{
		{"match above threshold", []int{0, 5, 0}, map[int][]uint64{1: {1, 2}, 2: {7, 7, 7, 7, 7}}, 64, 1},
		{"match under threshold goes to smallest tree", []int{0, 0, 0}, map[int][]uint64{0: {1, 6}, 1: {8, 9}, 2: {5}}, 54, 2},
		{"imbalanced: fewest in flight", []int{70, 100, 3}, map[int][]uint64{1: {1, 2, 3, 4}}, 64, 2},
		{"abs gap without ratio: balanced", []int{200, 280, 200}, map[int][]uint64{1: {1, 2, 3, 4}}, 64, 1},
	} {
		p := NewSGLang(len(c.running))
		if got := peerPick(t, p, p.tree, c.tree, c.running, c.tokens, chain); got != c.want {
			t.Errorf("%s: picked %d, want %d", c.name, got, c.want)
		}
		if depth, _ := p.tree.Match(chain); depth[c.want] != len(chain) {
			t.Errorf("%s: the prompt was not inserted into worker %d's tree", c.name, c.want)
		}
	}
}

func TestLLMDScores(t *testing.T) {
	chain := []uint64{1, 2, 3, 4}
	for _, c := range []struct {
		name    string
		running []int
		held    map[int][]uint64
		want    int
	}{
		// prefix 3×(normalised 1 vs 0) beats queue 2×1 and KV 2×(1−usage)
		{"longest prefix wins", []int{0, 0, 0}, map[int][]uint64{0: {1}, 2: {1, 2, 3}}, 2},
		// one holder, busier: 3 + 2×0 + 2×(1−.05) = 4.9 against 0 + 2 + 2 = 4
		{"prefix outweighs queue", []int{5, 0, 0}, map[int][]uint64{0: {1}}, 0},
		// equal prefixes normalise to 1 each: the shorter queue decides
		{"equal prefixes: queue", []int{3, 1, 2}, map[int][]uint64{0: {1, 2}, 1: {1, 2}, 2: {1, 2}}, 1},
	} {
		p := NewLLMD(len(c.running), 1)
		if got := peerPick(t, p, p.idx, c.held, c.running, 64, chain); got != c.want {
			t.Errorf("%s: picked %d, want %d", c.name, got, c.want)
		}
	}
}

func TestAIBrixRules(t *testing.T) {
	chain := []uint64{1, 2, 3, 4}
	for _, c := range []struct {
		name    string
		running []int
		table   map[int][]uint64
		want    int
	}{
		{"highest match within mean + std", []int{1, 1, 1}, map[int][]uint64{0: {1}, 2: {1, 2, 3}}, 2},
		// [4 0 0 0]: mean 1, std √3 → bound 2.73: worker 0 is over it
		{"best match over the std bound: next match", []int{4, 0, 0, 0}, map[int][]uint64{0: {1, 2, 3}, 3: {1}}, 3},
		{"no match: fewest running", []int{2, 1, 0, 1}, nil, 2},
		// [20 0 0 0]: 20 > 2 × (5 + 1) and gap 20 ≥ 8: only idle pods are matched
		{"gate: least loaded only", []int{20, 0, 0, 0}, map[int][]uint64{0: {1, 2, 3, 4}, 2: {1}}, 2},
	} {
		p := NewAIBrix(len(c.running), 1)
		if got := peerPick(t, p, p.table, c.table, c.running, 64, chain); got != c.want {
			t.Errorf("%s: picked %d, want %d", c.name, got, c.want)
		}
	}
}

func TestDynamoCoreCost(t *testing.T) {
	// Worker 0 holds 3 of 4 blocks and has 2 requests (2 blocks, 32 prefill
	// tokens waiting): logit = (32 + 16)/16 + 2 = 5; worker 1 is idle and
	// empty: 64/16 + 0 = 4. Weight 1 picks worker 1; weight 4: 4×3+2 = 14
	// against 16, worker 0.
	for _, c := range []struct {
		weight float64
		want   int
	}{{1, 1}, {4, 0}} {
		cfg := routing.DynamoConfig()
		cfg.OverlapWeight = c.weight
		p, err := NewCore(NameDynamo, 2, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := peerPick(t, p, p.idx, map[int][]uint64{0: {1, 2, 3}}, []int{2, 0}, 64, []uint64{1, 2, 3, 4}); got != c.want {
			t.Errorf("weight %v: picked %d, want %d", c.weight, got, c.want)
		}
	}
}
