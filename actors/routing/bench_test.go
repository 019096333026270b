package routing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// benchSetup: n candidates (n/2 workers × 2 dp ranks, sorted by key), every
// rank loaded with a few requests, and overlaps on `overlapping` of them.
func benchSetup(b *testing.B, cfg Config, n, overlapping int, sorted bool) (*Router, []Candidate, []Overlap) {
	r := newRouter(b, cfg)
	rng := rand.New(rand.NewPCG(1, 1))
	c := make([]Candidate, n)
	for i := range c {
		c[i] = Candidate{Key: wk(uint64(i/2+1), uint32(i%2)), Degraded: i%97 == 0}
		for j := range 3 {
			loadOn(b, r, fmt.Sprint(i, "-", j), c[i].Key, int64(rng.IntN(4096)), int64(rng.IntN(64)))
		}
	}
	ov := make([]Overlap, 0, overlapping)
	step := max(1, n/max(1, overlapping))
	for i := 0; i < n && len(ov) < overlapping; i += step {
		ov = append(ov, Overlap{Key: c[i].Key, Blocks: uint32(rng.IntN(64))})
	}
	if !sorted {
		rng.Shuffle(len(ov), func(i, j int) { ov[i], ov[j] = ov[j], ov[i] })
	}
	return r, c, ov
}

func BenchmarkDecide(b *testing.B) {
	req := Request{ID: "bench-request", ISL: 64 * 16, BlockSize: 16}
	for _, bc := range []struct {
		name        string
		temp        float64
		overlapping int
		sorted      bool
		scores      bool
	}{
		{"1000cand/overlap0", 0, 0, true, false},
		{"1000cand/overlap8", 0, 8, true, false},
		{"1000cand/overlap1000sorted", 0, 1000, true, false},
		{"1000cand/overlap1000unsorted", 0, 1000, false, false},
		{"1000cand/overlap8/scores", 0, 8, true, true},
		{"1000cand/overlap8/temp0.5", 0.5, 8, true, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Temperature = bc.temp
			r, c, ov := benchSetup(b, cfg, 1000, bc.overlapping, bc.sorted)
			req := req
			req.WithScores = bc.scores
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := r.Decide(req, ov, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecideNewList passes a differently ordered candidate list every
// time: no slot hint matches, so every candidate costs a map lookup (the
// worst case; a caller reusing its registry's slice never pays it).
func BenchmarkDecideNewList(b *testing.B) {
	r, c, ov := benchSetup(b, DefaultConfig(), 1000, 8, true)
	c2 := slices.Clone(c)
	slices.Reverse(c2)
	req := Request{ID: "bench-request", ISL: 64 * 16, BlockSize: 16}
	lists := [][]Candidate{c, c2}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := r.Decide(req, ov, lists[i&1]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRouteLifecycle: Route (decide + add) then prefill_done and free,
// with 1,000 candidates and a steady population of tracked requests.
func BenchmarkRouteLifecycle(b *testing.B) {
	r, c, ov := benchSetup(b, DefaultConfig(), 1000, 8, true)
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = fmt.Sprint("req-", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		if _, err := r.Route(Request{ID: id, ISL: 1024, BlockSize: 16}, ov, c, t0); err != nil {
			b.Fatal(err)
		}
		_ = r.Load().PrefillDone(id, t0)
		_ = r.Load().Free(id)
		i++
	}
}
