package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The randomized trials run three populations: message faults with cuts,
// with engine restarts, and with both. Cache-keeping restarts are only
// caught when a later store names a kept parent: a documented limit
// (README.md, "Limits"); KVROUTER_CHAOS_KINDS=all
// runs them.
var populations = []string{
	"drop,duplicate,reorder,truncate,corrupt,cut",
	"drop,duplicate,reorder,truncate,corrupt,restart_wipe",
	"drop,duplicate,reorder,truncate,corrupt,cut,restart_wipe",
}

// chaosConfig is the config of TestTrials and TestChaosSeed for a list of
// fault kinds, its repro command naming them.
func chaosConfig(t *testing.T, kinds string) Config {
	t.Helper()
	ks, err := ParseKinds(kinds)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Plan: PlanConfig{Kinds: ks},
		Repro: fmt.Sprintf("KVROUTER_CHAOS_SEED=%%d KVROUTER_CHAOS_KINDS=%s go test ./bench/chaos -run TestChaosSeed -v", kinds)}
}

// envUint reads a non-negative integer from the environment (def when unset).
func envUint(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// TestTrials runs the randomized trials: 50 per population (150) in a
// normal run. Long mode: KVROUTER_CHAOS_TRIALS=n per population,
// KVROUTER_CHAOS_BASE=first seed, KVROUTER_CHAOS_KINDS=kinds|all for one
// population of your own.
func TestTrials(t *testing.T) {
	pops := populations
	if k := os.Getenv("KVROUTER_CHAOS_KINDS"); k != "" {
		pops = []string{k}
	}
	for _, kinds := range pops {
		cfg := chaosConfig(t, kinds)
		cfg.Trials = int(envUint(t, "KVROUTER_CHAOS_TRIALS", 50))
		cfg.Seed = envUint(t, "KVROUTER_CHAOS_BASE", 1)
		r := Run(context.Background(), cfg)
		var b strings.Builder
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		t.Logf("kinds %s:\n%s", kinds, b.String())
		if len(r.Trials) != cfg.Trials {
			t.Fatalf("%d trials ran, want %d", len(r.Trials), cfg.Trials)
		}
		if n := len(r.Failures()); n > 0 {
			t.Errorf("kinds %s: %d of %d trials failed (see above)", kinds, n, len(r.Trials))
		}
	}
}

// TestChaosSeed reruns one trial: KVROUTER_CHAOS_SEED (default 1) with
// KVROUTER_CHAOS_KINDS (default the first population).
func TestChaosSeed(t *testing.T) {
	kinds := populations[0]
	if k := os.Getenv("KVROUTER_CHAOS_KINDS"); k != "" {
		kinds = k
	}
	tr := RunTrial(context.Background(), chaosConfig(t, kinds), envUint(t, "KVROUTER_CHAOS_SEED", 1))
	t.Logf("\n%s", tr.Describe())
	if tr.Failed() {
		t.Error("the trial failed")
	}
	if len(tr.Streams) == 0 {
		t.Error("no stream was checked")
	}
}
