package routing

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// TestCosts compares the two cost functions on one situation: A holds 3
// of the request's 4 blocks but has 64 prefill tokens queued (4 blocks)
// and 2 decode blocks; B is idle and holds nothing.
func TestCosts(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	for _, tc := range []struct {
		name   string
		cost   Cost
		weight float64
		logits []float64 // A, B
		want   messages.WorkerKey
	}{
		// weight × (queued + new) + decode: A 1×(4+1)+2 = 7, B 4
		{"dynamo, weight 1", CostDynamo, 1, []float64{7, 4}, B},
		// the queue is weighted too: A 8×5+2 = 42, B 32
		{"dynamo, weight 8", CostDynamo, 8, []float64{42, 32}, B},
		// weight × new + queued + decode: A 1 + 4 + 2 = 7, B 4
		{"kvrouter, weight 1", CostKVRouter, 1, []float64{7, 4}, B},
		// A 8×1 + 4 + 2 = 14, B 8×4 = 32: the cached worker keeps it
		{"kvrouter, weight 8 (default)", CostKVRouter, 8, []float64{14, 32}, A},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := CostConfig(tc.cost)
			cfg.OverlapWeight = tc.weight
			r := newRouter(t, cfg)
			loadOn(t, r, "busy", A, 64, 2)
			d, err := r.Decide(Request{ID: "q", ISL: 64, BlockSize: 16, WithScores: true}, []Overlap{{A, 3}}, cands(A, B))
			if err != nil {
				t.Fatal(err)
			}
			if d.Worker != tc.want || d.Scores[0].Logit != tc.logits[0] || d.Scores[1].Logit != tc.logits[1] {
				t.Errorf("chose %v with logits %v, %v; want %v with %v", d.Worker, d.Scores[0].Logit, d.Scores[1].Logit, tc.want, tc.logits)
			}
		})
	}
	if c := DefaultConfig(); c.Cost != CostKVRouter || c.OverlapWeight != DefaultOverlapWeight || c.Temperature != 0 {
		t.Errorf("DefaultConfig() = %+v", c)
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
