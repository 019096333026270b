package loadgen

import (
	"slices"
	"testing"
)

func TestGenerateAgentic(t *testing.T) {
	cfg := DefaultAgentic()
	cfg.Requests = 3000
	a, b := GenerateAgentic(cfg), GenerateAgentic(cfg)
	if len(a) != cfg.Requests {
		t.Fatalf("%d requests, want %d", len(a), cfg.Requests)
	}
	for i := range a {
		if a[i].Session != b[i].Session || !slices.Equal(a[i].Tokens, b[i].Tokens) {
			t.Fatalf("request %d differs between two runs with seed %d", i, cfg.Seed)
		}
	}
	cfg.Seed++
	if c := GenerateAgentic(cfg); slices.Equal(c[0].Tokens, a[0].Tokens) {
		t.Error("another seed gave the same first prompt")
	}
	// Each turn extends its session's previous prompt; sessions have
	// TurnsMin..TurnsMax requests (the last open ones may be cut short).
	last, turns := map[string][]uint32{}, map[string]int{}
	for i, r := range a {
		if p, ok := last[r.Session]; ok {
			grown := len(r.Tokens) - len(p)
			if !slices.Equal(r.Tokens[:len(p)], p) || grown < cfg.StepMin || grown > cfg.StepMax {
				t.Fatalf("request %d (%s) does not extend its session's previous prompt by one step", i, r.Session)
			}
		}
		last[r.Session] = r.Tokens
		turns[r.Session]++
	}
	over := 0
	for _, n := range turns {
		if n > cfg.TurnsMax {
			over++
		}
	}
	if over > 0 || len(turns) < cfg.Requests/cfg.TurnsMax {
		t.Errorf("%d sessions, %d over %d turns", len(turns), over, cfg.TurnsMax)
	}
	// Zipf popularity: sessions open with their tenant's system prompt; the
	// most common one is shared by far more sessions than a uniform choice
	// of 256 tenants would give.
	firsts := map[uint32]int{}
	for _, p := range last {
		firsts[p[0]]++ // the first token identifies the tenant's prompt (almost surely)
	}
	top := 0
	for _, n := range firsts {
		top = max(top, n)
	}
	if uniform := len(turns) / cfg.Tenants; top < 10*uniform {
		t.Errorf("most popular system prompt opens %d of %d sessions; uniform would be ~%d", top, len(turns), uniform)
	}
	if _, err := LoadTrace("gen:nope", TraceOptions{}); err == nil {
		t.Error("unknown generated workload accepted")
	}
	if got, err := LoadTrace(AgenticTrace, TraceOptions{Limit: 10}); err != nil || len(got) != 10 || TraceLabel(AgenticTrace) != "agentic" {
		t.Errorf("LoadTrace(%s, 10): %d requests, %v; label %q", AgenticTrace, len(got), err, TraceLabel(AgenticTrace))
	}
}
