package loadgen

import (
	"slices"
	"testing"
)

func TestInferSessions(t *testing.T) {
	ids := [][]uint64{
		{1, 2, 3},          // 0: new
		{1, 2, 3, 4, 5},    // 1: continues 0
		{1, 2, 9},          // 2: shares a prefix only → new
		{1, 2, 3, 4, 5, 6}, // 3: continues 1 (longest), so 0's session
		{},                 // 4: empty → new
		{1, 2, 9, 10},      // 5: continues 2
		{7},                // 6: new
		{1, 2, 3},          // 7: equal to 0 → continues it
		{1},                // 8: prefix of others but no earlier request is its prefix → new
		{1, 8},             // 9: continues 8
	}
	want := []string{"s0", "s0", "s2", "s0", "s4", "s2", "s6", "s0", "s8", "s8"}
	if got := InferSessions(ids); !slices.Equal(got, want) {
		t.Errorf("InferSessions = %v\nwant            %v", got, want)
	}
}

// The longest earlier request wins when two earlier requests of different
// sessions are both prefixes.
func TestInferSessionsLongestPrefixWins(t *testing.T) {
	ids := [][]uint64{{1, 2}, {1}, {1, 2, 3}} // {1} comes later than {1, 2}: its own session
	got := InferSessions(ids)
	if want := []string{"s0", "s1", "s0"}; !slices.Equal(got, want) {
		t.Errorf("InferSessions = %v, want %v", got, want)
	}
}
