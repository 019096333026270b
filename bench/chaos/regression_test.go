package chaos

import (
	"context"
	"testing"
)

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

// An engine without a replay endpoint restarted while a cut kept the
// router away; the router's position matched the new publisher's seqs by
// coincidence, so the old blocks stayed (seed 271 of the population with
// cuts and restarts). Fixed: a broken connection drops such a stream at
// once.
func TestRegression_RestartWithoutReplayBehindACut(t *testing.T) {
	if tr := RunTrial(context.Background(), chaosConfig(t, populations[2]), 271); tr.Failed() {
		t.Fatalf("diverged:\n%s", tr.Describe())
	}
}
