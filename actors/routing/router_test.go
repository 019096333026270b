package routing

// Over 500 lines on purpose: the cost rules and their tie-breaks are
// checked against one set of helpers (candidates, loads, overlaps).

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func wk(w uint64, r uint32) messages.WorkerKey {
	return messages.WorkerKey{Worker: messages.WorkerID(w), DpRank: messages.DpRank(r)}
}

func cands(keys ...messages.WorkerKey) []Candidate {
	c := make([]Candidate, len(keys))
	for i, k := range keys {
		c[i] = Candidate{Key: k}
	}
	return c
}

func newRouter(t testing.TB, cfg Config) *Router {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// loadOn gives key exactly prefill active prefill tokens and blocks active
// blocks (one request in prefill).
func loadOn(t testing.TB, r *Router, id string, key messages.WorkerKey, prefill, blocks int64) {
	t.Helper()
	if err := r.Load().Add(id, key, prefill, blocks, t0); err != nil {
		t.Fatal(err)
	}
}

type rankLoad struct {
	key             messages.WorkerKey
	prefill, blocks int64
}

// TestCost checks hand-computed logits and winners of the cost (doc.go, Cost).
func TestCost(t *testing.T) {
	A, B, C := wk(1, 0), wk(2, 0), wk(2, 1)
	tests := []struct {
		name     string
		weight   float64
		isl, bs  int
		loads    []rankLoad
		overlaps []Overlap
		cands    []messages.WorkerKey
		want     messages.WorkerKey
		logits   []float64 // per candidate
		cached   int64     // of the winner
		prefillT int64     // Decision.PrefillTokens
		reqBlks  int64     // Decision.RequestBlocks
	}{
		{
			// A: (0+64−32)/16 = 2; B: 64/16 = 4.
			name: "overlap wins when idle", weight: 1, isl: 64, bs: 16,
			overlaps: []Overlap{{Key: A, Blocks: 2}},
			cands:    []messages.WorkerKey{A, B},
			want:     A, logits: []float64{2, 4}, cached: 32, prefillT: 32, reqBlks: 4,
		},
		{
			// A: (160+64−64)/16 + 10 = 20; B: 4.
			name: "load beats a full hit", weight: 1, isl: 64, bs: 16,
			loads:    []rankLoad{{A, 160, 10}},
			overlaps: []Overlap{{Key: A, Blocks: 4}},
			cands:    []messages.WorkerKey{A, B},
			want:     B, logits: []float64{20, 4}, cached: 0, prefillT: 64, reqBlks: 4,
		},
		{
			// weight 2: A: 2×(64−32)/16 + 3 = 7; B: 2×4 = 8.
			name: "weight 2 favours the cache", weight: 2, isl: 64, bs: 16,
			loads:    []rankLoad{{A, 0, 3}},
			overlaps: []Overlap{{Key: A, Blocks: 2}},
			cands:    []messages.WorkerKey{A, B},
			want:     A, logits: []float64{7, 8}, cached: 32, prefillT: 32, reqBlks: 4,
		},
		{
			// weight 1: A: 2 + 3 = 5; B: 4.
			name: "weight 1 same inputs", weight: 1, isl: 64, bs: 16,
			loads:    []rankLoad{{A, 0, 3}},
			overlaps: []Overlap{{Key: A, Blocks: 2}},
			cands:    []messages.WorkerKey{A, B},
			want:     B, logits: []float64{5, 4}, cached: 0, prefillT: 64, reqBlks: 4,
		},
		{
			// isl 70: A cached 64, (70−64)/16 = 0.375; B 70/16 = 4.375;
			// request blocks ⌈70/16⌉ = 5.
			name: "partial last block", weight: 1, isl: 70, bs: 16,
			overlaps: []Overlap{{Key: A, Blocks: 4}},
			cands:    []messages.WorkerKey{A, B},
			want:     A, logits: []float64{0.375, 4.375}, cached: 64, prefillT: 6, reqBlks: 5,
		},
		{
			// An overlap longer than the request is capped at isl: A 0.
			name: "overlap capped at isl", weight: 1, isl: 64, bs: 16,
			overlaps: []Overlap{{Key: A, Blocks: 10}},
			cands:    []messages.WorkerKey{A, B},
			want:     A, logits: []float64{0, 4}, cached: 64, prefillT: 0, reqBlks: 4,
		},
		{
			// weight 0: load only. A decode 1, B decode 2, C 0 but degraded
			// plays no role here; C wins with 0.
			name: "weight 0 is load only", weight: 0, isl: 64, bs: 16,
			loads:    []rankLoad{{A, 0, 1}, {B, 500, 2}},
			overlaps: []Overlap{{Key: A, Blocks: 4}},
			cands:    []messages.WorkerKey{A, B, C},
			want:     C, logits: []float64{1, 2, 0}, cached: 0, prefillT: 64, reqBlks: 4,
		},
		{
			// Active prefill tokens count in blocks: A (48+64)/16 = 7,
			// B (0+64−16)/16 + 2 = 5, C 4 + 1 = 5 → tie B/C on logit, C has
			// fewer blocks (1 < 2).
			name: "dp ranks are separate candidates", weight: 1, isl: 64, bs: 16,
			loads:    []rankLoad{{A, 48, 0}, {B, 0, 2}, {C, 0, 1}},
			overlaps: []Overlap{{Key: B, Blocks: 1}},
			cands:    []messages.WorkerKey{A, B, C},
			want:     C, logits: []float64{7, 5, 5}, cached: 0, prefillT: 64, reqBlks: 4,
		},
		{
			// Empty prompt: logit = decode blocks.
			name: "isl 0", weight: 1, isl: 0, bs: 16,
			loads:    []rankLoad{{A, 0, 2}, {B, 0, 1}},
			overlaps: []Overlap{{Key: A, Blocks: 3}},
			cands:    []messages.WorkerKey{A, B},
			want:     B, logits: []float64{2, 1}, cached: 0, prefillT: 0, reqBlks: 0,
		},
		{
			// Block size 1 (SGLang pages): A (10+100−40) = 70; B 100.
			name: "block size 1", weight: 1, isl: 100, bs: 1,
			loads:    []rankLoad{{A, 10, 0}},
			overlaps: []Overlap{{Key: A, Blocks: 40}},
			cands:    []messages.WorkerKey{A, B},
			want:     A, logits: []float64{70, 100}, cached: 40, prefillT: 60, reqBlks: 100,
		},
		{
			// Block size 3 (not a power of two): A (10−6)/3 = 4/3, B 10/3;
			// ⌈10/3⌉ = 4 blocks.
			name: "block size 3", weight: 1, isl: 10, bs: 3,
			overlaps: []Overlap{{Key: A, Blocks: 2}},
			cands:    []messages.WorkerKey{A, B},
			want:     A, logits: []float64{4.0 / 3, 10.0 / 3}, cached: 6, prefillT: 4, reqBlks: 4,
		},
		{
			// Overlap of a non-candidate is ignored; duplicates take the max.
			name: "stray and duplicate overlaps", weight: 1, isl: 64, bs: 16,
			overlaps: []Overlap{{Key: wk(9, 0), Blocks: 4}, {Key: B, Blocks: 1}, {Key: B, Blocks: 3}},
			cands:    []messages.WorkerKey{A, B},
			want:     B, logits: []float64{4, 1}, cached: 48, prefillT: 16, reqBlks: 4,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DynamoConfig()
			cfg.OverlapWeight = tc.weight
			r := newRouter(t, cfg)
			for i, l := range tc.loads {
				loadOn(t, r, fmt.Sprint("load-", i), l.key, l.prefill, l.blocks)
			}
			d, err := r.Decide(Request{ID: "q", ISL: tc.isl, BlockSize: tc.bs, WithScores: true}, tc.overlaps, cands(tc.cands...))
			if err != nil {
				t.Fatal(err)
			}
			if d.Worker != tc.want {
				t.Errorf("worker = %v, want %v", d.Worker, tc.want)
			}
			for i, s := range d.Scores {
				if s.Logit != tc.logits[i] {
					t.Errorf("logit[%v] = %v, want %v", s.Key, s.Logit, tc.logits[i])
				}
				if want := tc.weight*s.PrefillBlocks + float64(s.DecodeBlocks); want != s.Logit {
					t.Errorf("score %v inconsistent: %+v", s.Key, s)
				}
			}
			if d.CachedTokens != tc.cached || d.PrefillTokens != tc.prefillT || d.RequestBlocks != tc.reqBlks {
				t.Errorf("cached/prefill/blocks = %d/%d/%d, want %d/%d/%d",
					d.CachedTokens, d.PrefillTokens, d.RequestBlocks, tc.cached, tc.prefillT, tc.reqBlks)
			}
			if want := d.CachedTokens / int64(tc.bs); tc.isl > 0 && int64(d.OverlapBlocks) < want {
				t.Errorf("overlap %d < cached blocks %d", d.OverlapBlocks, want)
			}
		})
	}
}

func TestDecideErrors(t *testing.T) {
	r := newRouter(t, DynamoConfig())
	c := cands(wk(1, 0))
	for _, tc := range []struct {
		req   Request
		cands []Candidate
		want  error
	}{
		{Request{ISL: 1, BlockSize: 16}, nil, ErrNoCandidates},
		{Request{ISL: 1, BlockSize: 0}, c, ErrInvalidRequest},
		{Request{ISL: 1, BlockSize: MaxBlockSize + 1}, c, ErrInvalidRequest},
		{Request{ISL: -1, BlockSize: 16}, c, ErrInvalidRequest},
	} {
		if _, err := r.Decide(tc.req, nil, tc.cands); !errors.Is(err, tc.want) {
			t.Errorf("Decide(%+v, %d cands) = %v, want %v", tc.req, len(tc.cands), err, tc.want)
		}
	}
	for _, cfg := range []Config{
		{OverlapWeight: -1}, {OverlapWeight: math.NaN()}, {OverlapWeight: math.Inf(1)},
		{OverlapWeight: 1, Temperature: -0.1}, {OverlapWeight: 1, Temperature: math.NaN()},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// refTieHash re-implements the documented tie hash independently.
func refTieHash(id string, k messages.WorkerKey) uint64 {
	sm := func(x uint64) uint64 {
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
		x = (x ^ (x >> 27)) * 0x94d049bb133111eb
		return x ^ (x >> 31)
	}
	h := xxh3.HashString(id)
	kh := sm(uint64(k.Worker) ^ sm(uint64(k.DpRank)+0x9e3779b97f4a7c15))
	return sm(h ^ kh)
}

func TestTieBreakOrder(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	t.Run("fewer decode blocks", func(t *testing.T) {
		// A: (16+16)/16 + 0 = 2; B: 16/16 + 1 = 2.
		r := newRouter(t, DynamoConfig())
		loadOn(t, r, "a", A, 16, 0)
		loadOn(t, r, "b", B, 0, 1)
		for _, c := range [][]messages.WorkerKey{{A, B}, {B, A}} {
			d, _ := r.Decide(Request{ID: "q", ISL: 16, BlockSize: 16}, nil, cands(c...))
			if d.Worker != A || d.Tied != 2 {
				t.Errorf("order %v: got %v tied %d, want %v tied 2", c, d.Worker, d.Tied, A)
			}
		}
	})
	t.Run("fewer prefill tokens", func(t *testing.T) {
		cfg := DynamoConfig()
		cfg.OverlapWeight = 0
		r := newRouter(t, cfg)
		loadOn(t, r, "a", A, 100, 3)
		loadOn(t, r, "b", B, 0, 3)
		for _, c := range [][]messages.WorkerKey{{A, B}, {B, A}} {
			d, _ := r.Decide(Request{ID: "q", ISL: 16, BlockSize: 16}, nil, cands(c...))
			if d.Worker != B {
				t.Errorf("order %v: got %v, want %v", c, d.Worker, B)
			}
		}
	})
	t.Run("request hash", func(t *testing.T) {
		r := newRouter(t, DynamoConfig())
		keys := []messages.WorkerKey{wk(1, 0), wk(2, 0), wk(3, 0), wk(3, 1)}
		for i := range 50 {
			id := fmt.Sprint("req-", i)
			want := slices.MinFunc(keys, func(a, b messages.WorkerKey) int {
				ha, hb := refTieHash(id, a), refTieHash(id, b)
				switch {
				case ha < hb:
					return -1
				case ha > hb:
					return 1
				}
				return 0
			})
			d, _ := r.Decide(Request{ID: id, ISL: 32, BlockSize: 16}, nil, cands(keys...))
			if d.Worker != want || d.Tied != 4 {
				t.Fatalf("%s: got %v (tied %d), want %v", id, d.Worker, d.Tied, want)
			}
		}
	})
	t.Run("explicit hash overrides id", func(t *testing.T) {
		r := newRouter(t, DynamoConfig())
		keys := []messages.WorkerKey{wk(1, 0), wk(2, 0), wk(3, 0), wk(4, 0)}
		first, _ := r.Decide(Request{ID: "x", Hash: 42, ISL: 32, BlockSize: 16}, nil, cands(keys...))
		for i := range 20 {
			d, _ := r.Decide(Request{ID: fmt.Sprint("other-", i), Hash: 42, ISL: 32, BlockSize: 16}, nil, cands(keys...))
			if d.Worker != first.Worker {
				t.Fatalf("same Hash, different worker: %v vs %v", d.Worker, first.Worker)
			}
		}
	})
}

// TestTieBreakGolden pins the tie-break across releases and machines: a
// changed hash scheme moves every tied request and must be deliberate.
func TestTieBreakGolden(t *testing.T) {
	r := newRouter(t, DynamoConfig())
	keys := []messages.WorkerKey{wk(1, 0), wk(2, 0), wk(3, 0), wk(4, 0)}
	var got []string
	for i := range 8 {
		d, _ := r.Decide(Request{ID: fmt.Sprint("req-", i), ISL: 32, BlockSize: 16}, nil, cands(keys...))
		got = append(got, fmt.Sprint(d.Worker.Worker))
	}
	const want = "1,3,1,4,3,3,2,3"
	if s := strings.Join(got, ","); s != want {
		t.Errorf("tie-break choices = %s, want %s", s, want)
	}
}

func TestTieBreakSpreads(t *testing.T) {
	r := newRouter(t, DynamoConfig())
	keys := []messages.WorkerKey{wk(1, 0), wk(2, 0), wk(3, 0), wk(4, 0)}
	count := map[messages.WorkerKey]int{}
	for i := range 4000 {
		d, _ := r.Decide(Request{ID: fmt.Sprint("req-", i), ISL: 32, BlockSize: 16}, nil, cands(keys...))
		count[d.Worker]++
	}
	for _, k := range keys {
		if count[k] < 850 || count[k] > 1150 {
			t.Errorf("worker %v chosen %d/4000 times, want ~1000", k, count[k])
		}
	}
}

// randomScenario builds candidates, loads and overlaps with small value
// ranges so that ties on every level are frequent.
func randomScenario(rng *rand.Rand, n int) (keys []messages.WorkerKey, loads []rankLoad, ov []Overlap) {
	for i := range n {
		k := wk(uint64(1+i/2), uint32(i%2))
		keys = append(keys, k)
		if rng.IntN(3) > 0 {
			loads = append(loads, rankLoad{k, int64(rng.IntN(3)) * 16, int64(rng.IntN(3))})
		}
		if rng.IntN(2) == 0 {
			ov = append(ov, Overlap{Key: k, Blocks: uint32(rng.IntN(3))})
		}
	}
	return
}

// TestPermutationInvariance: the same inputs give the same choice in any
// candidate (and overlap) order, at temperature 0 and — with the same seed —
// when sampling.
func TestPermutationInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, temp := range []float64{0, 0.7} {
		for trial := range 300 {
			n := 2 + rng.IntN(40)
			keys, loads, ov := randomScenario(rng, n)
			decide := func(keys []messages.WorkerKey, ov []Overlap) Decision {
				cfg := DynamoConfig()
				cfg.Temperature = temp
				cfg.Rand = rand.NewPCG(7, uint64(trial))
				r := newRouter(t, cfg)
				for i, l := range loads {
					loadOn(t, r, fmt.Sprint(i), l.key, l.prefill, l.blocks)
				}
				d, err := r.Decide(Request{ID: fmt.Sprint("t", trial), ISL: 48, BlockSize: 16}, ov, cands(keys...))
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			want := decide(keys, ov)
			for range 5 {
				k2, o2 := slices.Clone(keys), slices.Clone(ov)
				rng.Shuffle(len(k2), func(i, j int) { k2[i], k2[j] = k2[j], k2[i] })
				rng.Shuffle(len(o2), func(i, j int) { o2[i], o2[j] = o2[j], o2[i] })
				if got := decide(k2, o2); got.Worker != want.Worker || got.Logit != want.Logit {
					t.Fatalf("T=%v trial %d: permuted choice %v, want %v", temp, trial, got.Worker, want.Worker)
				}
			}
		}
	}
}

// TestOverlapPaths: the linear, merge and map lookups agree with a naive
// model, duplicates and strays included.
func TestOverlapPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r := newRouter(t, DynamoConfig())
	for range 500 {
		n := 1 + rng.IntN(60)
		var keys []messages.WorkerKey
		for i := range n {
			keys = append(keys, wk(uint64(i/3), uint32(i%3)))
		}
		var ov []Overlap
		for range rng.IntN(80) {
			ov = append(ov, Overlap{Key: wk(uint64(rng.IntN(n/3+2)), uint32(rng.IntN(3))), Blocks: uint32(rng.IntN(10))})
		}
		if rng.IntN(2) == 0 {
			slices.SortFunc(ov, func(a, b Overlap) int {
				if keyLess(a.Key, b.Key) {
					return -1
				} else if keyLess(b.Key, a.Key) {
					return 1
				}
				return 0
			})
		}
		c := cands(keys...)
		if rng.IntN(3) == 0 {
			rng.Shuffle(n, func(i, j int) { c[i], c[j] = c[j], c[i] })
		}
		got := r.resolveOverlaps(ov, c)
		for i, cd := range c {
			var want uint32
			for _, o := range ov {
				if o.Key == cd.Key {
					want = max(want, o.Blocks)
				}
			}
			var g uint32
			if got != nil {
				g = got[i]
			}
			if g != want {
				t.Fatalf("overlap of %v = %d, want %d (m=%d)", cd.Key, g, want, len(ov))
			}
		}
	}
}

func TestDegraded(t *testing.T) {
	A, B, C := wk(1, 0), wk(2, 0), wk(3, 0)
	r := newRouter(t, DynamoConfig())
	c := []Candidate{{Key: A}, {Key: B, Degraded: true}, {Key: C, Degraded: true}}
	// B is degraded but its reported overlap is scored honestly and wins.
	d, err := r.Decide(Request{ID: "q", ISL: 64, BlockSize: 16, WithScores: true}, []Overlap{{Key: B, Blocks: 3}}, c)
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != B || !d.Degraded || d.DegradedCandidates != 2 || d.OverlapBlocks != 3 || d.Logit != 1 {
		t.Errorf("decision = %+v, want B degraded with overlap 3, logit 1, 2 degraded", d)
	}
	for i, s := range d.Scores {
		if s.Degraded != c[i].Degraded {
			t.Errorf("score %v degraded = %v", s.Key, s.Degraded)
		}
	}
	d, _ = r.Decide(Request{ID: "q", ISL: 64, BlockSize: 16}, []Overlap{{Key: A, Blocks: 3}}, c)
	if d.Worker != A || d.Degraded || d.DegradedCandidates != 2 {
		t.Errorf("decision = %+v, want A not degraded, 2 degraded candidates", d)
	}
}

// Load booked on other router hosts (Candidate.Remote) adds to this
// Router's own: it moves the decision and shows in the scores.
func TestRemoteLoad(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	r := newRouter(t, DynamoConfig())
	now := time.Unix(0, 0)
	// A holds 2 blocks of the prompt; locally B carries one booked request.
	if _, err := r.Route(Request{ID: "local", ISL: 32, BlockSize: 16}, nil, []Candidate{{Key: B}}, now); err != nil {
		t.Fatal(err)
	}
	req := Request{ID: "q", ISL: 64, BlockSize: 16, WithScores: true}
	d, err := r.Decide(req, []Overlap{{Key: A, Blocks: 2}}, []Candidate{{Key: A}, {Key: B}})
	if err != nil || d.Worker != A {
		t.Fatalf("without remote load: %+v, %v; want A", d, err)
	}
	// Elsewhere A carries 3 requests in decode (12 blocks) and one prefill.
	c := []Candidate{{Key: A, Remote: RemoteLoad{PrefillTokens: 48, Blocks: 12}}, {Key: B}}
	d, err = r.Decide(req, []Overlap{{Key: A, Blocks: 2}}, c)
	if err != nil || d.Worker != B {
		t.Fatalf("with A's remote load: %+v, %v; want B", d, err)
	}
	if s := d.Scores[0]; s.ActivePrefillTokens != 48 || s.DecodeBlocks != 12 || s.Logit != (48+64-32)/16.0+12 {
		t.Errorf("A's score %+v: remote load not counted", s)
	}
	if s := d.Scores[1]; s.ActivePrefillTokens != 32 || s.DecodeBlocks != 2 {
		t.Errorf("B's score %+v: its own booking lost", s)
	}
}

func TestTemperatureDistribution(t *testing.T) {
	// Logits 0..4 → norm 0, .25, .5, .75, 1; T = 0.5 →
	// p ∝ 1, e^-.5, e^-1, e^-1.5, e^-2 = .429, .260, .158, .096, .058.
	keys := []messages.WorkerKey{wk(5, 0), wk(1, 0), wk(4, 0), wk(2, 0), wk(3, 0)}
	decode := []int64{0, 1, 2, 3, 4}
	cfg := DynamoConfig()
	cfg.Temperature = 0.5
	cfg.Rand = rand.NewPCG(11, 12)
	r := newRouter(t, cfg)
	for i, k := range keys {
		if decode[i] > 0 {
			loadOn(t, r, fmt.Sprint(i), k, 0, decode[i])
		}
	}
	req := Request{ID: "q", ISL: 0, BlockSize: 16, WithScores: true}
	d, err := r.Decide(req, nil, cands(keys...))
	if err != nil {
		t.Fatal(err)
	}
	probs := make([]float64, len(keys))
	sum := 0.0
	for i, s := range d.Scores {
		probs[i] = s.Probability
		sum += s.Probability
		want := math.Exp(-float64(decode[i])/4/0.5) / (1 + math.Exp(-0.5) + math.Exp(-1) + math.Exp(-1.5) + math.Exp(-2))
		if math.Abs(s.Probability-want) > 1e-12 {
			t.Errorf("p[%d] = %v, want %v", i, s.Probability, want)
		}
		if i > 0 && !(probs[i] < probs[i-1]) {
			t.Errorf("probabilities not decreasing in logit: %v", probs[:i+1])
		}
	}
	if math.Abs(sum-1) > 1e-12 {
		t.Errorf("probabilities sum to %v", sum)
	}
	const draws = 10000
	count := make([]int, len(keys))
	req.WithScores = false
	for range draws {
		d, _ := r.Decide(req, nil, cands(keys...))
		if !d.Sampled {
			t.Fatal("Sampled not set")
		}
		count[slices.Index(keys, d.Worker)]++
	}
	for i := range keys {
		f := float64(count[i]) / draws
		// σ ≤ 0.005 at n = 10k; 0.02 is four σ.
		if math.Abs(f-probs[i]) > 0.02 {
			t.Errorf("worker %v chosen %.3f of draws, want %.3f", keys[i], f, probs[i])
		}
		if i > 0 && count[i] >= count[i-1] {
			t.Errorf("counts not decreasing in logit: %v", count)
		}
	}
	// The same seed replays the same choices.
	replay := func() []messages.WorkerKey {
		cfg.Rand = rand.NewPCG(99, 100)
		r := newRouter(t, cfg)
		var out []messages.WorkerKey
		for range 50 {
			d, _ := r.Decide(req, nil, cands(keys...))
			out = append(out, d.Worker)
		}
		return out
	}
	if a, b := replay(), replay(); !slices.Equal(a, b) {
		t.Error("same seed, different choices")
	}
}

func TestTemperatureEdges(t *testing.T) {
	keys := []messages.WorkerKey{wk(1, 0), wk(2, 0), wk(3, 0), wk(4, 0)}
	run := func(temp float64, withLoad bool) []int {
		cfg := DynamoConfig()
		cfg.Temperature = temp
		cfg.Rand = rand.NewPCG(5, 6)
		r := newRouter(t, cfg)
		if withLoad {
			loadOn(t, r, "a", keys[1], 0, 1)
			loadOn(t, r, "b", keys[2], 0, 2)
			loadOn(t, r, "c", keys[3], 0, 3)
		}
		count := make([]int, len(keys))
		for i := range 8000 {
			d, err := r.Decide(Request{ID: fmt.Sprint(i), ISL: 16, BlockSize: 16, WithScores: true}, nil, cands(keys...))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range d.Scores {
				if math.IsNaN(s.Probability) {
					t.Fatalf("T=%v: NaN probability", temp)
				}
			}
			count[slices.Index(keys, d.Worker)]++
		}
		return count
	}
	// Equal logits: uniform.
	for i, c := range run(1, false) {
		if c < 1800 || c > 2200 {
			t.Errorf("equal logits: worker %d chosen %d/8000, want ~2000", i, c)
		}
	}
	// A vanishing temperature is the argmin, with no NaN.
	if c := run(1e-300, true); c[0] != 8000 {
		t.Errorf("T=1e-300: counts %v, want all on worker 0", c)
	}
	// A huge temperature is close to uniform.
	for i, c := range run(1e9, true) {
		if c < 1800 || c > 2200 {
			t.Errorf("T=1e9: worker %d chosen %d/8000, want ~2000", i, c)
		}
	}
}

func TestScoresBufferReused(t *testing.T) {
	r := newRouter(t, DynamoConfig())
	c := cands(wk(1, 0), wk(2, 0))
	d1, _ := r.Decide(Request{ID: "a", ISL: 16, BlockSize: 16, WithScores: true}, nil, c)
	d2, _ := r.Decide(Request{ID: "b", ISL: 16, BlockSize: 16, WithScores: true}, nil, c)
	if &d1.Scores[0] != &d2.Scores[0] {
		t.Error("Scores not reused")
	}
	if d3, _ := r.Decide(Request{ID: "c", ISL: 16, BlockSize: 16}, nil, c); d3.Scores != nil {
		t.Error("Scores without WithScores")
	}
}

func TestRoute(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	r := newRouter(t, DynamoConfig())
	c := cands(A, B)
	d, err := r.Route(Request{ID: "r1", ISL: 70, BlockSize: 16}, []Overlap{{Key: A, Blocks: 2}}, c, t0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != A {
		t.Fatalf("worker %v", d.Worker)
	}
	if got, want := r.Load().Of(A), (RankLoad{Key: A, PrefillTokens: 70 - 32, Blocks: 5, PrefillRequests: 1}); got != want {
		t.Errorf("load %+v, want %+v", got, want)
	}
	// A now holds (38+70−32)/16 + 5 = 9.75 vs B 70/16 = 4.375.
	d, err = r.Route(Request{ID: "r2", ISL: 70, BlockSize: 16}, []Overlap{{Key: A, Blocks: 2}}, c, t0)
	if err != nil || d.Worker != B {
		t.Fatalf("second route: %v %v", d.Worker, err)
	}
	if _, err := r.Route(Request{ID: "r1", ISL: 70, BlockSize: 16}, nil, c, t0); !errors.Is(err, ErrDuplicateRequest) {
		t.Errorf("duplicate route: %v", err)
	}
	if _, err := r.Route(Request{ID: "", ISL: 70, BlockSize: 16}, nil, c, t0); !errors.Is(err, ErrInvalidRequestID) {
		t.Errorf("empty id: %v", err)
	}
	if _, err := r.Route(Request{ID: "r3", ISL: 70, BlockSize: 16}, nil, nil, t0); !errors.Is(err, ErrNoCandidates) {
		t.Errorf("no candidates: %v", err)
	}
	if st := r.Load().Stats(); st.Added != 2 || st.Duplicate != 1 || st.InvalidID != 1 || r.Load().Len() != 2 {
		t.Errorf("stats %+v len %d", st, r.Load().Len())
	}
	// Route expires first: both are gone after the prefill TTL.
	if _, err := r.Route(Request{ID: "r4", ISL: 16, BlockSize: 16}, nil, c, t0.Add(DefaultPrefillTTL)); err != nil {
		t.Fatal(err)
	}
	if st := r.Load().Stats(); st.ExpiredPrefill != 2 || r.Load().Len() != 1 {
		t.Errorf("after TTL: stats %+v len %d", st, r.Load().Len())
	}
}

func TestRouteFullRefused(t *testing.T) {
	cfg := DynamoConfig()
	cfg.Load = LoadConfig{MaxRequests: 1, RefuseWhenFull: true}
	r := newRouter(t, cfg)
	c := cands(wk(1, 0))
	if _, err := r.Route(Request{ID: "a", ISL: 16, BlockSize: 16}, nil, c, t0); err != nil {
		t.Fatal(err)
	}
	d, err := r.Route(Request{ID: "b", ISL: 16, BlockSize: 16}, nil, c, t0)
	if !errors.Is(err, ErrFull) || d.Worker != wk(1, 0) {
		t.Errorf("full: %+v %v, want a valid decision with ErrFull", d, err)
	}
}
