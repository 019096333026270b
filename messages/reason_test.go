package messages

import "testing"

// TestLosesHistory pins the classification of every reason: a new reason
// must be classified on purpose.
func TestLosesHistory(t *testing.T) {
	byDesign := map[Reason]bool{ReasonNone: true, ReasonUnknownTag: true, ReasonNonMainAttentionKind: true,
		ReasonUnknownKind: true, ReasonNonMainAttentionGroup: true, ReasonUnlearnedGroupIdx: true, ReasonRemoteLocality: true}
	for r := range ReasonCount {
		if got, want := r.LosesHistory(), !byDesign[r]; got != want {
			t.Errorf("%q.LosesHistory() = %v, want %v", r, got, want)
		}
	}
}
