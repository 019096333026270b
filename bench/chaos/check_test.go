package chaos

import (
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/messages"
)

func hashes(hs ...uint64) []messages.ExternalHash {
	out := make([]messages.ExternalHash, len(hs))
	for i, h := range hs {
		out[i] = messages.ExternalHash(h)
	}
	return out
}

func rules(r StreamReport) []Rule {
	var rs []Rule
	for _, v := range r.Violations {
		rs = append(rs, v.Rule)
	}
	return rs
}

func TestCheckStreamRules(t *testing.T) {
	held := hashes(1, 2, 3, 4)
	for _, tc := range []struct {
		name        string
		indexed     []messages.ExternalHash
		historyHeld bool
		state       coalescer.StreamState
		want        []Rule
	}{
		{"equal and exact", hashes(1, 2, 3, 4), true, coalescer.StateExact, nil},
		{"an extra block is a phantom", hashes(1, 2, 3, 4, 9), true, coalescer.StateExact, []Rule{RulePhantom}},
		{"a phantom on a degraded stream is still one", hashes(0, 1), false, coalescer.StateDegraded, []Rule{RulePhantom}},
		{"missing although the history was held", hashes(1, 2), true, coalescer.StateDegraded, []Rule{RuleMissing}},
		{"missing on an exact stream", hashes(1, 2), false, coalescer.StateExact, []Rule{RuleUndeclared}},
		{"missing on a stream never heard", nil, false, coalescer.StateUnknown, []Rule{RuleUndeclared}},
		{"missing, history gone, flagged degraded", hashes(1, 2), false, coalescer.StateDegraded, nil},
		{"everything wrong", hashes(2, 7), true, coalescer.StateExact, []Rule{RulePhantom, RuleMissing, RuleUndeclared}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckStream(Truth{Stream: messages.StreamID{Worker: 1}, Held: held, HistoryHeld: tc.historyHeld}, tc.indexed, tc.state)
			if got := rules(r); !slices.Equal(got, tc.want) {
				t.Errorf("rules %v, want %v (%s)", got, tc.want, r)
			}
			if r.OK() != (len(tc.want) == 0) {
				t.Errorf("OK() = %v with violations %v", r.OK(), r.Violations)
			}
		})
	}
}

func TestCheckStreamCountsAndSamples(t *testing.T) {
	r := CheckStream(Truth{Held: hashes(1)}, hashes(1, 10, 11, 12, 13, 14, 15, 16), coalescer.StateExact)
	if len(r.Violations) != 1 || r.Violations[0].Count != 7 || !slices.Equal(r.Violations[0].Sample, hashes(10, 11, 12, 13, 14)) {
		t.Errorf("violations %+v, want 7 phantoms sampled 10..14", r.Violations)
	}
	if r.Held != 1 || r.Indexed != 8 {
		t.Errorf("held %d indexed %d", r.Held, r.Indexed)
	}
}

// Blocks the index holds for a (worker, dp_rank) no engine reports are all
// phantoms; a stream the index does not know at all is all missing.
func TestCheckCoversEveryIndexedStream(t *testing.T) {
	truths := []Truth{
		{Stream: messages.StreamID{Worker: 1}, Held: hashes(1, 2)},
		{Stream: messages.StreamID{Worker: 2}, Held: hashes(5), HistoryHeld: true},
	}
	obs := Observed{
		Blocks: map[messages.WorkerKey][]messages.ExternalHash{
			{Worker: 1}:            hashes(1, 2),
			{Worker: 1, DpRank: 3}: hashes(8),
			{Worker: 9}:            nil,
		},
		States: map[messages.StreamID]coalescer.StreamState{{Worker: 1}: coalescer.StateExact},
	}
	reports := Check(truths, obs)
	got := map[messages.StreamID][]Rule{}
	for _, r := range reports {
		got[r.Stream] = rules(r)
	}
	want := map[messages.StreamID][]Rule{
		{Worker: 1}:            nil,
		{Worker: 1, DpRank: 3}: {RulePhantom},
		{Worker: 2}:            {RuleMissing, RuleUndeclared},
	}
	if len(got) != len(want) {
		t.Fatalf("reports for %v, want %v", got, want)
	}
	for s, w := range want {
		if !slices.Equal(got[s], w) {
			t.Errorf("stream %v: rules %v, want %v", s, got[s], w)
		}
	}
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct{ a, b, want []messages.ExternalHash }{
		{hashes(1, 2, 3), hashes(2), hashes(1, 3)},
		{hashes(1, 2, 3), nil, hashes(1, 2, 3)},
		{nil, hashes(1), nil},
		{hashes(5, 9), hashes(1, 5, 7, 9, 11), nil},
	} {
		if got := diff(tc.a, tc.b); !slices.Equal(got, tc.want) {
			t.Errorf("diff(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
