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
			cfg.CacheFalloff, cfg.PredictedWaitFalloff, cfg.PredictedWaitCheck = 0, tc.falloff, false
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

// The wait-or-recompute check (wait.go): a burst's sibling whose 64-token
// prefix A only holds by prediction, behind 112 queued tokens (the first
// siblings'), would wait 112 + 16 tokens there against 80 on an idle
// worker: 48 saved, times 3 idle workers, exceeds the 64 tokens the
// recompute adds, so A's predicted blocks earn nothing and an idle worker
// takes it. It follows its prefix when the time saved is too small for the
// spare capacity (80 queued: 16 × 3 < 64), when no other worker is idle
// (each decodes a request, none with prefill queued), when A's prefill is
// done (the events still to come), when the blocks are confirmed, when one
// of two idle workers is saturated (not one the request could go to: one
// spare worker, 48 < 64) and with the check off.
func TestPredictedWaitCheck(t *testing.T) {
	A, B, C, D := wk(1, 0), wk(2, 0), wk(3, 0), wk(4, 0)
	req := Request{ID: "q", ISL: 80, BlockSize: 16, WithScores: true}
	waiting := Overlap{Key: A, Blocks: 4, Predicted: 4, Waiting: 2}
	tests := []struct {
		name     string
		check    bool
		overlaps []Overlap
		queued   int64 // A's queued prefill tokens (the first siblings')
		idle     int   // how many of B, C and D have no request (the rest decode one)
		satB     bool  // B's engine reports saturation
		want     string
		logitA   float64
		withheld uint64
	}{
		// A without credit: 16 × 80/16 + 112/16 queued + 5 decode = 92; idle B, C, D: 80.
		{"idle workers elsewhere", true, []Overlap{waiting}, 112, 3, false, "other", 92, 1},
		// A keeps its credit: 16 × 1 + 5 + 5 = 26 (B, C, D: 80).
		{"saved too little for the spare capacity", true, []Overlap{waiting}, 80, 3, false, "A", 26, 0},
		// 16 × 1 + 7 + 5 = 28 (B, C, D: 85).
		{"no other worker idle", true, []Overlap{waiting}, 112, 0, false, "A", 28, 0},
		{"prefill done, not confirmed", true, []Overlap{waiting}, 0, 3, false, "A", 21, 0},
		{"confirmed blocks", true, []Overlap{{Key: A, Blocks: 4, Waiting: 2}}, 112, 3, false, "A", 28, 0},
		// B and C idle, B saturated: one spare worker, 48 × 1 < 64.
		{"one of two idle workers saturated", true, []Overlap{waiting}, 112, 2, true, "A", 28, 0},
		{"check off", false, []Overlap{waiting}, 112, 3, false, "A", 28, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.CacheFalloff, cfg.PredictedWaitFalloff, cfg.PredictedWaitCheck = 0, 0, tc.check
			r := newRouter(t, cfg)
			loadOn(t, r, "first", A, tc.queued, 5)
			cs := cands(A, B, C, D)
			for i, k := range []messages.WorkerKey{B, C, D} {
				if k == B && tc.satB {
					cs[i+1].Reported = Reported{Saturated: true}
				}
				if i >= tc.idle {
					loadOn(t, r, fmt.Sprint("other", k), k, 0, 5)
				}
			}
			d, err := r.Decide(req, tc.overlaps, cs)
			if err != nil {
				t.Fatal(err)
			}
			got := "other"
			if d.Worker == A {
				got = "A"
			}
			if got != tc.want || !near(d.Scores[0].Logit, tc.logitA) || r.WaitWithheld() != tc.withheld {
				t.Errorf("chose %s with A's logit %v, %d withheld; want %s, %v, %d", got, d.Scores[0].Logit, r.WaitWithheld(), tc.want, tc.logitA, tc.withheld)
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
