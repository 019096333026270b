package routing

import (
	"math"
	"strconv"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// TestCosts compares the cost functions on one situation: A holds 3 of
// the request's 4 blocks but has 64 prefill tokens queued (4 blocks), 2
// decode blocks and 1 request; B is idle and holds nothing. The mean is
// 0.5 requests, so A's r = (1 + 1) / 1.5 = 4/3 and, at falloff 1, its
// cache credit loses (1/3)² / (1 + (1/3)²) = 0.1.
func TestCosts(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	for _, tc := range []struct {
		name            string
		cost            Cost
		weight, falloff float64
		logits          []float64 // A, B
		want            messages.WorkerKey
	}{
		// weight × (queued + new) + decode: A 1×(4+1)+2 = 7, B 4; the
		// falloff is not the reference's and is ignored
		{"dynamo, weight 1", CostDynamo, 1, 1, []float64{7, 4}, B},
		// the queue is weighted too: A 8×5+2 = 42, B 32
		{"dynamo, weight 8", CostDynamo, 8, 0, []float64{42, 32}, B},
		// weight × new + queued + decode: A 1 + 4 + 2 = 7, B 4
		{"kvrouter, weight 1, no falloff", CostKVRouter, 1, 0, []float64{7, 4}, B},
		// A 16×1 + 4 + 2 = 22, B 16×4 = 64: the cached worker keeps it
		{"kvrouter, weight 16, no falloff", CostKVRouter, 16, 0, []float64{22, 64}, A},
		// A 16×(1 + 0.1×3) + 4 + 2 = 26.8, B 64: slightly busier, still kept
		{"kvrouter, weight 16, falloff 1 (default)", CostKVRouter, 16, 1, []float64{26.8, 64}, A},
		// A 16×(1 + 0.5×3) + 6 = 46 (falloff 9: (1/3)²×9 = 1, half the credit)
		{"kvrouter, weight 16, falloff 9", CostKVRouter, 16, 9, []float64{46, 64}, A},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := CostConfig(tc.cost)
			cfg.OverlapWeight, cfg.CacheFalloff = tc.weight, tc.falloff
			r := newRouter(t, cfg)
			loadOn(t, r, "busy", A, 64, 2)
			d, err := r.Decide(Request{ID: "q", ISL: 64, BlockSize: 16, WithScores: true}, []Overlap{{Key: A, Blocks: 3}}, cands(A, B))
			if err != nil {
				t.Fatal(err)
			}
			if d.Worker != tc.want || !near(d.Scores[0].Logit, tc.logits[0]) || !near(d.Scores[1].Logit, tc.logits[1]) {
				t.Errorf("chose %v with logits %v, %v; want %v with %v", d.Worker, d.Scores[0].Logit, d.Scores[1].Logit, tc.want, tc.logits)
			}
			if d.Scores[0].Requests != 1 || d.Scores[1].Requests != 0 {
				t.Errorf("requests %d, %d; want 1, 0", d.Scores[0].Requests, d.Scores[1].Requests)
			}
		})
	}
	if c := DefaultConfig(); c.Cost != CostKVRouter || c.OverlapWeight != 16 || c.CacheFalloff != 1 || c.Temperature != 0 {
		t.Errorf("DefaultConfig() = %+v, want kvrouter's cost, weight 16, falloff 1, temperature 0", c)
	}
	if c := DynamoConfig(); c.Cost != CostDynamo || c.OverlapWeight != 1 || c.CacheFalloff != 0 || c.Temperature != 0 {
		t.Errorf("DynamoConfig() = %+v", c)
	}
	for _, c := range []Cost{CostKVRouter, CostDynamo} {
		if got, err := ParseCost(c.String()); err != nil || got != c {
			t.Errorf("ParseCost(%q) = %v, %v", c, got, err)
		}
	}
	if _, err := ParseCost("fastest"); err == nil {
		t.Error("ParseCost accepted an unknown cost")
	}
}

// TestCacheFalloff: at the defaults, a worker holding the whole prompt
// keeps it until it tracks about 3× the candidates' mean requests; then
// an idle worker takes it. The request is 64 tokens (4 blocks), all cached
// on A, whose n requests hold 1 block each; B, C and D are idle. A's logit
// is 16 × busy × 4 + n with busy = k / (1 + k), k = (r − 1)², r = (n + 1)
// / (n/4 + 1); B's is 16 × 4 = 64.
func TestCacheFalloff(t *testing.T) {
	A, B, C, D := wk(1, 0), wk(2, 0), wk(3, 0), wk(4, 0)
	for _, tc := range []struct {
		n     int
		logit float64 // A's
		kept  bool
	}{
		{0, 0, true},                   // r = 1: the full credit
		{1, 64*0.36/1.36 + 1, true},    // r = 1.6
		{6, 64*3.24/4.24 + 6, true},    // r = 2.8
		{10, 64*225.0/274 + 10, true},  // r = 22/7: 62.6
		{11, 64*4.84/5.84 + 11, false}, // r = 3.2: 64.04 > 64
		{20, 64*6.25/7.25 + 20, false}, // r = 3.5
	} {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			r := newRouter(t, DefaultConfig())
			for i := range tc.n {
				loadOn(t, r, "a"+strconv.Itoa(i), A, 0, 1)
			}
			d, err := r.Decide(Request{ID: "q", ISL: 64, BlockSize: 16, WithScores: true}, []Overlap{{Key: A, Blocks: 4}}, cands(A, B, C, D))
			if err != nil {
				t.Fatal(err)
			}
			if (d.Worker == A) != tc.kept || !near(d.Scores[0].Logit, tc.logit) || d.Scores[1].Logit != 64 {
				t.Errorf("%d requests on A: chose %v with logits %v, %v; want A kept %v, logits %v, 64", tc.n, d.Worker, d.Scores[0].Logit, d.Scores[1].Logit, tc.kept, tc.logit)
			}
		})
	}
	// A candidate at or below the mean keeps the full credit; the remote
	// requests of a cluster count with the local ones.
	r := newRouter(t, DefaultConfig())
	cs := cands(A, B)
	cs[1].Remote = RemoteLoad{Requests: 3}
	loadOn(t, r, "a", A, 0, 1)
	d, err := r.Decide(Request{ID: "q", ISL: 64, BlockSize: 16, WithScores: true}, []Overlap{{Key: A, Blocks: 4}}, cs)
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != A || d.Scores[0].Logit != 1 || d.Scores[1].Requests != 3 {
		t.Errorf("A below the mean: chose %v with logit %v (want A, 1), B's requests %d (want 3)", d.Worker, d.Scores[0].Logit, d.Scores[1].Requests)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }
