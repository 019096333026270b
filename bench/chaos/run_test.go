package chaos

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// A failed trial is printed with its seed, the command that reruns it and
// its plan; passing trials only count in the figures.
func TestReportNamesEachFailedSeed(t *testing.T) {
	bad := Trial{Plan: NewPlan(9, PlanConfig{}), Streams: []StreamReport{{Stream: messages.StreamID{Worker: 2},
		Violations: []Violation{{Rule: RulePhantom, Count: 1, Sample: hashes(77)}}}}}
	stuck := Trial{Plan: NewPlan(10, PlanConfig{}), Err: errors.New("not settled")}
	good := Trial{Plan: NewPlan(8, PlanConfig{}), Streams: []StreamReport{{Stream: messages.StreamID{Worker: 1}, Held: 12}}}
	r := &Report{Config: Config{Seed: 8, Repro: "rerun --seed %d"}.withDefaults(), Trials: []Trial{good, bad, stuck}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"3 trials (seeds 8..10)", "2 failed", "FAIL seed 9 — rerun: rerun --seed 9", "phantom ×1 [77]",
		"FAIL seed 10 — rerun: rerun --seed 10", "error: not settled", "12 engine blocks checked", "violations (streams): phantom 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAIL seed 8") {
		t.Errorf("a passing trial is listed as failed:\n%s", out)
	}
}
