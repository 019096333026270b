package chaos

import (
	"reflect"
	"slices"
	"testing"
)

func TestNewPlanIsDeterministic(t *testing.T) {
	cfg := PlanConfig{FaultRate: 0.3}
	a, b := NewPlan(42, cfg), NewPlan(42, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different plans:\n%s\n%s", a, b)
	}
	if reflect.DeepEqual(a, NewPlan(43, cfg)) {
		t.Error("seeds 42 and 43 give the same plan")
	}
}

func TestNewPlanDrawsOnlyConfiguredFaultsInRange(t *testing.T) {
	cfg := PlanConfig{Kinds: []FaultKind{Drop, Reorder, RestartWipe}, Prompts: 10, FaultRate: 0.5, MaxEngines: 3}
	seen := map[FaultKind]bool{}
	engines := map[int]bool{}
	for seed := range uint64(200) {
		p := NewPlan(seed, cfg)
		engines[len(p.Engines)] = true
		for _, e := range p.Engines {
			if e.Prompts != 10 {
				t.Fatalf("seed %d: %d prompts", seed, e.Prompts)
			}
			for _, f := range e.Faults {
				seen[f.Kind] = true
				switch {
				case !slices.Contains(cfg.Kinds, f.Kind):
					t.Fatalf("seed %d: fault %v not configured", seed, f)
				case f.Kind.OnMessage() && (f.At < 0 || f.At >= 20):
					t.Fatalf("seed %d: message fault %v outside the first 2×Prompts messages", seed, f)
				case !f.Kind.OnMessage() && (f.At < 1 || f.At >= 10):
					t.Fatalf("seed %d: restart %v outside prompts 1..9", seed, f)
				case f.Kind == Reorder && (f.Arg < 1 || f.Arg > 3):
					t.Fatalf("seed %d: reorder by %d", seed, f.Arg)
				}
			}
			if len(e.MessageFaults())+len(e.Restarts()) != len(e.Faults) {
				t.Fatalf("seed %d: faults %v do not split into messages and restarts", seed, e.Faults)
			}
		}
	}
	if len(seen) != 3 || !engines[1] || !engines[3] {
		t.Errorf("200 plans drew kinds %v and engine counts %v", seen, engines)
	}
}

func TestParseKinds(t *testing.T) {
	ks, err := ParseKinds("drop, cut,restart_keep")
	if err != nil || !slices.Equal(ks, []FaultKind{Drop, Cut, RestartKeep}) {
		t.Errorf("ParseKinds = %v, %v", ks, err)
	}
	all, err := ParseKinds("all")
	if err != nil || !slices.Equal(all, AllKinds()) || len(all) != 8 {
		t.Errorf("all = %v, %v", all, err)
	}
	for _, k := range all {
		if back, err := ParseKinds(k.String()); err != nil || back[0] != k {
			t.Errorf("%v does not round-trip: %v, %v", k, back, err)
		}
	}
	for _, bad := range []string{"", "drop,,cut", "explode"} {
		if _, err := ParseKinds(bad); err == nil {
			t.Errorf("ParseKinds(%q) accepted", bad)
		}
	}
}
