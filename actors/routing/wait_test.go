package routing

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// A burst's siblings on a worker predicted to hold their prefix: the
// predicted blocks lose credit with the siblings waiting on them and the
// share of idle candidates (wait.go), so the sixth sibling goes to an idle
// worker (74.5 against 64); confirmed blocks, a prediction another overlap outranks, a fleet
// with no idle candidate and a falloff of 0 keep the full credit.
func TestPredictedBlocksStillToPrefill(t *testing.T) {
	A, B, C, D := wk(1, 0), wk(2, 0), wk(3, 0), wk(4, 0)
	req := Request{ID: "q", ISL: 64, BlockSize: 16, WithScores: true}
	waiting := Overlap{Key: A, Blocks: 4, Predicted: 4, Waiting: 5}
	tests := []struct {
		name     string
		falloff  float64
		overlaps []Overlap
		busyAll  bool
		want     string
		logitA   float64
	}{
		// keep = 1 / (1 + 5 × 3/4) = 4/19: A is credited 64 × 4/19 tokens,
		// 16 × (64 − 64×4/19)/16 + 4 queued + 20 decode = 74.53 > B's 64.
		{"predicted, waiting, idle candidates", 1, []Overlap{waiting}, false, "idle", 16*(64-64*4.0/19)/16 + 24},
		{"falloff 0", 0, []Overlap{waiting}, false, "A", 24},
		{"confirmed blocks", 1, []Overlap{{Key: A, Blocks: 4, Waiting: 5}}, false, "A", 24},
		{"the index's overlap is larger", 1, []Overlap{{Key: A, Blocks: 4}, {Key: A, Blocks: 2, Predicted: 2, Waiting: 5}}, false, "A", 24},
		{"no idle candidate", 1, []Overlap{waiting}, true, "A", 24},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.CacheFalloff, cfg.PredictedWaitFalloff = 0, tc.falloff
			r := newRouter(t, cfg)
			loadOn(t, r, "first", A, 64, 4) // the first sibling's prefill
			for i := range 4 {
				loadOn(t, r, fmt.Sprint("sibling", i), A, 0, 4)
			}
			if tc.busyAll {
				for _, k := range []messages.WorkerKey{B, C, D} {
					loadOn(t, r, fmt.Sprint("other", k), k, 16, 1)
				}
			}
			d, err := r.Decide(req, tc.overlaps, cands(A, B, C, D))
			if err != nil {
				t.Fatal(err)
			}
			names := map[messages.WorkerKey]string{A: "A", B: "B", C: "C", D: "D"}
			got := names[d.Worker]
			if got != "A" {
				got = "idle" // the tie among B, C and D goes by hash
			}
			if got != tc.want || !near(d.Scores[0].Logit, tc.logitA) {
				t.Errorf("chose %s with A's logit %v; want %s, %v", got, d.Scores[0].Logit, tc.want, tc.logitA)
			}
		})
	}
}

// A negative or infinite falloff is refused.
func TestPredictedWaitFalloffInvalid(t *testing.T) {
	for _, f := range []float64{-1, math.Inf(1)} {
		cfg := DefaultConfig()
		cfg.PredictedWaitFalloff = f
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("falloff %v: %v, want ErrInvalidConfig", f, err)
		}
	}
}
