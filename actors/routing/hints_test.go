package routing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// checkScores verifies every candidate's load terms against Load.Of.
func checkScores(t *testing.T, r *Router, c []Candidate, what string) {
	t.Helper()
	d, err := r.Decide(Request{ID: "chk", ISL: 16, BlockSize: 16, WithScores: true}, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range d.Scores {
		want := r.Load().Of(c[i].Key)
		if s.Key != c[i].Key || s.ActivePrefillTokens != want.PrefillTokens || s.DecodeBlocks != want.Blocks {
			t.Fatalf("%s: score %+v, load %+v", what, s, want)
		}
	}
}

// TestHintsStale: cached slot hints never yield a wrong load, whatever
// happens between decisions — candidate lists that change or reorder,
// ranks that go idle, dropped workers, slots reclaimed and reused.
func TestHintsStale(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	r := newRouter(t, DefaultConfig())
	l := r.Load()
	pool := make([]messages.WorkerKey, 30)
	for i := range pool {
		pool[i] = wk(uint64(i/3), uint32(i%3))
	}
	var live []string
	c := cands(pool...)
	for step := range 5000 {
		switch op := rng.IntN(10); {
		case op < 4:
			id := fmt.Sprint("s", step)
			if l.Add(id, pool[rng.IntN(len(pool))], int64(rng.IntN(100)), int64(rng.IntN(10)), t0) == nil {
				live = append(live, id)
			}
		case op < 7 && len(live) > 0:
			j := rng.IntN(len(live))
			_ = l.Free(live[j])
			live = append(live[:j], live[j+1:]...)
		case op < 8 && len(live) > 0:
			_ = l.PrefillDone(live[rng.IntN(len(live))], t0)
		case op < 9:
			l.DropWorker(messages.WorkerID(rng.IntN(10)))
		default:
			// A different candidate list: a random subset in random order.
			c = cands(pool...)
			rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
			c = c[:1+rng.IntN(len(c))]
		}
		checkScores(t, r, c, fmt.Sprint("step ", step))
	}
}

// TestHintsSweep: idle slots reclaimed in bulk and reused by other keys.
func TestHintsSweep(t *testing.T) {
	r := newRouter(t, DefaultConfig())
	l := r.Load()
	n := 2*sweepMinIdle + 50
	keys := make([]messages.WorkerKey, n)
	for i := range keys {
		keys[i] = wk(uint64(i+1), 0)
		if err := l.Add(fmt.Sprint("a", i), keys[i], 5, 1, t0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 2 {
		_ = l.Free(fmt.Sprint("a", i)) // idle: n/2 ≥ sweepMinIdle
	}
	c := cands(keys...)
	checkScores(t, r, c, "before sweep")
	slotsBefore := len(l.rankIdx)
	// A new key triggers the sweep; its slot reuses a freed index.
	newKey := wk(999999, 7)
	if err := l.Add("new", newKey, 40, 4, t0); err != nil {
		t.Fatal(err)
	}
	if len(l.rankIdx) >= slotsBefore {
		t.Fatalf("no sweep: %d slots before, %d after", slotsBefore, len(l.rankIdx))
	}
	// Idle keys come back on other slots.
	for i := 0; i < n; i += 4 {
		_ = l.Add(fmt.Sprint("b", i), keys[i], 7, 2, t0)
	}
	checkScores(t, r, append(c, Candidate{Key: newKey}), "after sweep")
}

// TestSamplePruningExact: the pruned sampler picks what an unpruned
// exponential race over the same uniforms picks.
func TestSamplePruningExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for trial := range 300 {
		temp := []float64{0.01, 0.1, 0.5, 1, 5}[trial%5]
		n := 2 + rng.IntN(200)
		keys, loads, ov := randomScenario(rng, n)
		cfg := DefaultConfig()
		cfg.Temperature = temp
		cfg.Rand = rand.NewPCG(uint64(trial), 9)
		r := newRouter(t, cfg)
		for i, ld := range loads {
			loadOn(t, r, fmt.Sprint(i), ld.key, ld.prefill, ld.blocks)
		}
		seeds := rand.NewPCG(uint64(trial), 9)
		for range 20 {
			d, err := r.Decide(Request{ID: "p", ISL: 48, BlockSize: 16, WithScores: true}, ov, cands(keys...))
			if err != nil {
				t.Fatal(err)
			}
			seed := seeds.Uint64()
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, s := range d.Scores {
				lo, hi = min(lo, s.Logit), max(hi, s.Logit)
			}
			best, bestKey := -1, math.Inf(1)
			for i, s := range d.Scores {
				nrm := 0.0
				if hi > lo {
					nrm = (s.Logit - lo) / (hi - lo)
				}
				k := -math.Log(unitOpen(mix64(seed^keyHash(s.Key)))) * math.Exp(nrm/temp)
				if k < bestKey {
					best, bestKey = i, k
				}
			}
			if d.Worker != d.Scores[best].Key {
				t.Fatalf("trial %d T=%v: chose %v, unpruned race %v", trial, temp, d.Worker, d.Scores[best].Key)
			}
		}
	}
}
