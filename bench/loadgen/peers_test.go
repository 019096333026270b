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
		name      string
		running   []int
		processed []int
		tree      map[int][]uint64
		tokens    int
		want      int
	}{
		{"match above threshold", []int{0, 5, 0}, nil, map[int][]uint64{1: {1, 2}, 2: {7, 7, 7, 7, 7}}, 64, 1},
		{"match under threshold: fewest in flight, not the smallest tree", []int{2, 1, 1}, nil, map[int][]uint64{0: {1, 6}, 2: {5}}, 54, 1},
		{"tie on in flight: fewer processed", []int{2, 1, 1}, []int{0, 3, 2}, map[int][]uint64{0: {1, 6}}, 54, 2},
		{"imbalanced: fewest in flight", []int{70, 100, 3}, nil, map[int][]uint64{1: {1, 2, 3, 4}}, 64, 2},
		{"abs gap without ratio: balanced", []int{200, 280, 200}, nil, map[int][]uint64{1: {1, 2, 3, 4}}, 64, 1},
	} {
		p := NewSGLang(len(c.running))
		copy(p.processed, c.processed)
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
		// queue and KV equal: prefix 2 × 3/4 beats 2 × 1/4
		{"longest prefix wins", []int{0, 0, 0}, map[int][]uint64{0: {1}, 2: {1, 2, 3}}, 2},
		// all blocks held: 2 + 0 + 0.95 = 2.95 against 0 + 1 + 1 = 2
		{"whole prefix outweighs queue", []int{5, 0, 0}, map[int][]uint64{0: {1, 2, 3, 4}}, 0},
		// one block of four: 0.5 + 0 + 0.95 = 1.45 against 1 + 1 = 2 (min–max
		// normalised, the lone holder would score the full 2 and win)
		{"a short prefix is a fraction of the prompt", []int{5, 0, 1}, map[int][]uint64{0: {1}}, 1},
	} {
		p := NewLLMD(len(c.running), 1)
		if got := peerPick(t, p, p.idx, c.held, c.running, 64, chain); got != c.want {
			t.Errorf("%s: picked %d, want %d", c.name, got, c.want)
		}
	}
}

// llm-d reads queue and KV usage from its last metrics poll: requests
// routed since are not in them.
func TestLLMDReadsPolledMetrics(t *testing.T) {
	f, err := NewFleet(FleetConfig{Workers: 2, BlockSize: 16, Capacity: 100, InFlight: 1 << 20, Gap: 0.02, PrefillRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := NewLLMD(2, 1)
	p.idx.Add(0, []uint64{1})
	q := Query{Chain: []uint64{1, 2, 3, 4}, Tokens: 64, BlockSize: 16, Fleet: f}
	f.Advance()
	p.Pick(q) // t = 0: polls an idle fleet
	for range 2 {
		f.Book(0, 16, 0)
		f.Advance()
	}
	// t = 0.04: worker 0 queues 2, but the poll of t = 0 said idle: the prefix decides
	if got := p.Pick(q); got != 0 {
		t.Errorf("before the next poll: picked %d, want 0", got)
	}
	f.Book(0, 16, 0)
	f.Advance()
	// t = 0.06: the poll of t = 0.05 sees 3 queued: 0.5 + 0 + 0.97 against 2
	if got := p.Pick(q); got != 1 {
		t.Errorf("after the poll: picked %d, want 1", got)
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
		// max − min 9 > 8: only the idle pods are matched
		{"gate: least loaded only", []int{9, 0, 0, 5}, map[int][]uint64{0: {1, 2, 3, 4}, 2: {1}}, 2},
	} {
		p := NewAIBrix(len(c.running), 1)
		if got := peerPick(t, p, p.table, c.table, c.running, 64, chain); got != c.want {
			t.Errorf("%s: picked %d, want %d", c.name, got, c.want)
		}
	}
}

func TestDynamoCoreCost(t *testing.T) {
	// Worker 0 holds blocks 1–3 in the index and runs 2 requests over the
	// same 3 blocks, fully cached (no prefill queued): its decode blocks
	// are the 3 distinct ones + block 4 of the new request, logit = 1 × 16/16
	// + 4 = 5; worker 1 is idle and empty: 64/16 + 4 new blocks = 8. Summing
	// every running request's blocks (3 + 3) would make worker 0 cost 7
	// against 4 and lose.
	f, err := NewFleet(FleetConfig{Workers: 2, BlockSize: 16, Capacity: 100, InFlight: 1 << 20, PrefillRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		f.Advance()
		f.BookChain(0, 48, 48, []uint64{1, 2, 3})
	}
	f.Advance()
	if f.ActiveBlocks(0) != 3 || f.NewBlocks(0, []uint64{1, 2, 3, 4}) != 1 || f.NewBlocks(1, []uint64{1, 2, 3, 4}) != 4 {
		t.Fatalf("active %d, new %d/%d: want 3, 1, 4", f.ActiveBlocks(0), f.NewBlocks(0, []uint64{1, 2, 3, 4}), f.NewBlocks(1, []uint64{1, 2, 3, 4}))
	}
	p, err := NewCore(NameDynamo, 2, routing.DynamoConfig())
	if err != nil {
		t.Fatal(err)
	}
	p.idx.Add(0, []uint64{1, 2, 3})
	if got := p.Pick(Query{Chain: []uint64{1, 2, 3, 4}, Tokens: 64, BlockSize: 16, Fleet: f}); got != 0 {
		t.Errorf("picked %d, want 0 (a shared block counts once)", got)
	}
}

func TestFleetActiveBlocksFreed(t *testing.T) {
	f, err := NewFleet(FleetConfig{Workers: 1, BlockSize: 16, Capacity: 100, InFlight: 2, Gap: 1, PrefillRate: 16})
	if err != nil {
		t.Fatal(err)
	}
	for _, chain := range [][]uint64{{1, 2}, {1, 3}, {4}} {
		f.Advance()
		f.BookChain(0, 16*len(chain), 0, chain)
	}
	// request 0 ({1, 2}) was freed when request 2 arrived
	if got := f.ActiveBlocks(0); got != 3 {
		t.Errorf("%d active blocks, want 3 (1, 3, 4)", got)
	}
}
