package loadgen

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// group is one run of burst siblings: the first request and those that
// follow it.
type group struct{ start, n int }

func groups(reqs []Request) []group {
	var out []group
	for i, r := range reqs {
		switch {
		case r.Follows > 0:
			out[len(out)-1].n++
		case strings.HasPrefix(r.Session, "g"):
			out = append(out, group{start: i, n: 1})
		}
	}
	return out
}

func TestBurstShape(t *testing.T) {
	cfg := DefaultBurst()
	cfg.Requests = 3000
	reqs := GenerateBurst(cfg)
	if len(reqs) != cfg.Requests {
		t.Fatalf("%d requests, want %d", len(reqs), cfg.Requests)
	}
	gs := groups(reqs)
	siblings := 0
	for gi, g := range gs {
		siblings += g.n
		if gi < len(gs)-1 && (g.n < cfg.GroupMin || g.n > cfg.GroupMax) {
			t.Errorf("group at %d has %d siblings, want %d..%d", g.start, g.n, cfg.GroupMin, cfg.GroupMax)
		}
		first := reqs[g.start]
		if len(first.Tokens) < cfg.PrefixMin+cfg.SuffixMin {
			t.Errorf("group at %d: prompt of %d tokens, shorter than its prefix bound", g.start, len(first.Tokens))
		}
		for k := 1; k < g.n; k++ {
			r := reqs[g.start+k]
			if r.Follows <= 0 || r.Follows > cfg.SiblingGap {
				t.Errorf("sibling %d follows after %v, want (0, %v]", g.start+k, r.Follows, cfg.SiblingGap)
			}
			common := 0
			for common < min(len(r.Tokens), len(first.Tokens)) && r.Tokens[common] == first.Tokens[common] {
				common++
			}
			if common < cfg.PrefixMin || r.Session == first.Session {
				t.Errorf("sibling %d shares %d tokens (want ≥ %d) and session %q with its group's first", g.start+k, common, cfg.PrefixMin, r.Session)
			}
		}
	}
	if share := float64(siblings) / float64(len(reqs)); math.Abs(share-cfg.GroupShare) > 0.1 {
		t.Errorf("%.2f of the requests are siblings, want about %.2f", share, cfg.GroupShare)
	}
	// the ordinary traffic is multi-turn: some session comes back
	sessions := map[string]int{}
	for _, r := range reqs {
		if strings.HasPrefix(r.Session, "a") {
			sessions[r.Session]++
		}
	}
	multi := 0
	for _, n := range sessions {
		if n > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Error("no ordinary session has more than one turn")
	}
	again := GenerateBurst(cfg)
	for i := range reqs {
		if !slices.Equal(reqs[i].Tokens, again[i].Tokens) || reqs[i].Follows != again[i].Follows || reqs[i].Session != again[i].Session {
			t.Fatalf("request %d differs between two runs with one seed", i)
		}
	}
	cfg.Seed++
	if other := GenerateBurst(cfg); slices.Equal(other[0].Tokens, reqs[0].Tokens) && slices.Equal(other[1].Tokens, reqs[1].Tokens) {
		t.Error("another seed gave the same requests")
	}
}

func TestArrivalTimesKeepBurstsAndOfferedLoad(t *testing.T) {
	ms := time.Millisecond
	reqs := []Request{{}, {Follows: 2 * ms}, {Follows: 3 * ms}, {}, {}}
	at := ArrivalTimes(reqs, 1)
	// 5 requests span 5 s; the siblings take 5 ms, the 2 on-clock gaps the rest
	step := (5 - 0.005) / 2
	want := []float64{0, 0.002, 0.005, 0.005 + step, 0.005 + 2*step}
	for i := range want {
		if math.Abs(at[i]-want[i]) > 1e-9 {
			t.Fatalf("arrivals %v, want %v", at, want)
		}
	}
	if ArrivalTimes([]Request{{}, {}}, 1) != nil {
		t.Error("a workload without bursts got its own clock")
	}
}

func TestBurstTraceLoads(t *testing.T) {
	reqs, err := LoadTrace(BurstTrace, TraceOptions{Limit: 200})
	if err != nil || len(reqs) != 200 {
		t.Fatalf("%d requests, %v", len(reqs), err)
	}
	if TraceLabel(BurstTrace) != "burst" {
		t.Errorf("label %q", TraceLabel(BurstTrace))
	}
}
