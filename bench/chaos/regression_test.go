package chaos

import "testing"

// Regressions the randomized trials found (seed 7 of each plan); each
// diverged before its fix.

// A cut hid an engine restart: the listener missed the new publisher's low
// seqs, and its later seqs looked like a continuation. Fixed by verifying
// the last delivered batch on every replay and after every resubscription.
func TestRegression_RestartHiddenByCut(t *testing.T) {
	if tr := runOne(t, []Fault{{At: 1, Kind: Cut}, {At: 2, Kind: RestartWipe}}, nil); tr.Failed() {
		t.Fatalf("diverged:\n%s", tr.Describe())
	}
}

// A corrupt payload was counted and dropped, so a lost BlockRemoved left
// phantoms. Fixed: a batch that cannot be applied whole drops the stream
// and the listener rebuilds it from the replay buffer.
func TestRegression_CorruptPayloadLeavesPhantoms(t *testing.T) {
	if tr := runOne(t, []Fault{{At: 9, Kind: Corrupt}}, nil); tr.Failed() {
		t.Fatalf("diverged:\n%s", tr.Describe())
	}
}

// A restart that kept the engine's cache was taken as exact. Fixed: a store
// under a parent the stream never stored degrades an exact stream.
func TestRegression_RestartKeepClaimsExact(t *testing.T) {
	if tr := runOne(t, []Fault{{At: 10, Kind: RestartKeep}}, nil); tr.Failed() {
		t.Fatalf("diverged:\n%s", tr.Describe())
	}
}
