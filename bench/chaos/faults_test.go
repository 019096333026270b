package chaos

import (
	"context"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/messages"
)

// runOne runs a one-engine plan (seed 7, 24 prompts, replay with a large
// buffer unless mod changes it) and fails the test if it does not settle.
func runOne(t *testing.T, faults []Fault, mod func(*EnginePlan)) Trial {
	t.Helper()
	e := EnginePlan{Prompts: 24, Replay: true, ReplayBuffer: largeBuffer, Faults: faults}
	if mod != nil {
		mod(&e)
	}
	tr := RunPlan(context.Background(), Config{}, Plan{Seed: 7, Engines: []EnginePlan{e}})
	if tr.Err != nil {
		t.Fatalf("trial did not run: %v\n%s", tr.Err, tr.Describe())
	}
	for _, f := range faults {
		if f.Kind.OnMessage() && tr.Hops[0].Injected[f.Kind] == 0 {
			t.Fatalf("fault %v was never injected: %+v", f, tr.Hops[0])
		}
	}
	return tr
}

// requireConverged checks the trial's verdict and the stream's final state.
func requireConverged(t *testing.T, tr Trial, want coalescer.StreamState) {
	t.Helper()
	if tr.Failed() {
		t.Fatalf("did not converge:\n%s", tr.Describe())
	}
	s := tr.Streams[0]
	if s.State != want {
		t.Errorf("state %s, want %s:\n%s", s.State, want, tr.Describe())
	}
	if s.Held < 10 {
		t.Fatalf("the engine holds %d blocks: the trial proves little", s.Held)
	}
}

// requireCheckerCatches injects bugs into what the trial observed and
// checks that the checker reports each: a block the engine does not hold,
// a held block the index lost, and the loss hidden behind an exact state.
func requireCheckerCatches(t *testing.T, tr Trial) {
	t.Helper()
	truth := tr.Truths[0]
	key := messages.WorkerKey{Worker: truth.Stream.Worker, DpRank: truth.Stream.DpRank}
	indexed := tr.Observed.Blocks[key]
	state := tr.Observed.States[truth.Stream]

	extra := slices.Insert(slices.Clone(indexed), 0, messages.ExternalHash(0)) // engine hashes are never 0 here
	if slices.Contains(truth.Held, 0) {
		t.Fatal("the engine holds hash 0: pick another phantom")
	}
	if got := rules(CheckStream(truth, extra, state)); !slices.Contains(got, RulePhantom) {
		t.Errorf("an injected extra block: rules %v, want a phantom", got)
	}
	if len(indexed) == 0 {
		return
	}
	lost := slices.Delete(slices.Clone(indexed), 0, 1)
	wantLost := RuleUndeclared
	if truth.HistoryHeld {
		wantLost = RuleMissing
	}
	if got := rules(CheckStream(truth, lost, coalescer.StateExact)); !slices.Contains(got, wantLost) {
		t.Errorf("an injected lost block: rules %v, want %s", got, wantLost)
	}
}

func TestDropIsRepairedByReplay(t *testing.T) {
	tr := runOne(t, []Fault{{At: 3, Kind: Drop}, {At: 10, Kind: Drop}, {At: 11, Kind: Drop}}, nil)
	requireConverged(t, tr, coalescer.StateExact)
	requireCheckerCatches(t, tr)
	if tr.Listeners[0].Replays["ok"] < 2 { // the start replay and at least one gap
		t.Errorf("replays %v: the drops were not repaired by replay", tr.Listeners[0].Replays)
	}
}

func TestDropWithoutReplayDegradesWithoutPhantoms(t *testing.T) {
	tr := runOne(t, []Fault{{At: 3, Kind: Drop}, {At: 9, Kind: Drop}}, func(e *EnginePlan) { e.Replay = false })
	requireConverged(t, tr, coalescer.StateDegraded)
	requireCheckerCatches(t, tr)
	if tr.Listeners[0].Resyncs["history_missing"] < 2 {
		t.Errorf("resyncs %v: the drops were not noticed", tr.Listeners[0].Resyncs)
	}
}

// A cut longer than the replay buffer leaves the stream degraded, never
// wrong.
func TestHistoryGoneDegrades(t *testing.T) {
	tr := runOne(t, []Fault{{At: 6, Kind: Cut}}, func(e *EnginePlan) { e.ReplayBuffer = 3 })
	requireConverged(t, tr, coalescer.StateDegraded)
	requireCheckerCatches(t, tr)
	if tr.Listeners[0].Resyncs["history_missing"] != 1 {
		t.Errorf("resyncs %v, want one history_missing", tr.Listeners[0].Resyncs)
	}
}

func TestDuplicateConverges(t *testing.T) {
	tr := runOne(t, []Fault{{At: 5, Kind: Duplicate}, {At: 14, Kind: Duplicate}}, nil)
	requireConverged(t, tr, coalescer.StateExact)
	requireCheckerCatches(t, tr)
}

func TestReorderConverges(t *testing.T) {
	tr := runOne(t, []Fault{{At: 4, Kind: Reorder, Arg: 2}, {At: 15, Kind: Reorder, Arg: 1}}, nil)
	requireConverged(t, tr, coalescer.StateExact)
	requireCheckerCatches(t, tr)
}

// A message without its payload frame is dropped and counted by the
// listener; the gap it leaves is replayed.
func TestTruncatedMessageIsCountedAndReplayed(t *testing.T) {
	tr := runOne(t, []Fault{{At: 4, Kind: Truncate}, {At: 9, Kind: Truncate}}, nil)
	requireConverged(t, tr, coalescer.StateExact)
	requireCheckerCatches(t, tr)
	if got := tr.Listeners[0].BadFrames["frame_count"]; got != 2 {
		t.Errorf("bad frames %v, want frame_count 2", tr.Listeners[0].BadFrames)
	}
}

// A damaged payload is dropped and counted by the normalizer, the batches
// after it are applied, no phantom appears, and once the engine clears its
// cache the stream is exact again. (In between the stream is dropped,
// flagged degraded and rebuilt from the replay buffer:
// actors/listener/README.md, "Recovery after a batch the pipeline could not
// apply".)
func TestCorruptPayloadIsCountedAndClearConverges(t *testing.T) {
	tr := runOne(t, []Fault{{At: 2, Kind: Corrupt}}, func(e *EnginePlan) { e.ClearBefore = 8 })
	requireConverged(t, tr, coalescer.StateExact)
	requireCheckerCatches(t, tr)
	if tr.Normalizers[0].BadBatches != 1 {
		t.Errorf("normalizer counted %d bad batches, want 1", tr.Normalizers[0].BadBatches)
	}
}

// A cut connection loses what is published until the listener dials again;
// the replay fills the gap.
func TestCutIsRepairedByReplay(t *testing.T) {
	tr := runOne(t, []Fault{{At: 6, Kind: Cut}}, nil)
	requireConverged(t, tr, coalescer.StateExact)
	requireCheckerCatches(t, tr)
	if tr.Hops[0].Rebinds != 1 || tr.Listeners[0].Subscribed < 2 {
		t.Errorf("rebinds %d, listener subscriptions %d: the cut did not happen", tr.Hops[0].Rebinds, tr.Listeners[0].Subscribed)
	}
}

func TestRestartWipeConverges(t *testing.T) {
	tr := runOne(t, []Fault{{At: 8, Kind: RestartWipe}, {At: 16, Kind: RestartWipe}}, nil)
	requireConverged(t, tr, coalescer.StateExact)
	requireCheckerCatches(t, tr)
	if got := tr.Listeners[0].Resyncs["restart"]; got != 2 {
		t.Errorf("resyncs %v, want 2 restarts", tr.Listeners[0].Resyncs)
	}
}

// An engine restarted with its cache kept cannot be told from a fresh one
// (seq 0); once it clears its cache the stream is exact again and never held
// a phantom. (The state between is a known limit: README.md, "Limits".)
func TestRestartKeepConvergesAfterAClear(t *testing.T) {
	tr := runOne(t, []Fault{{At: 6, Kind: RestartKeep}}, func(e *EnginePlan) { e.ClearBefore = 12 })
	requireConverged(t, tr, coalescer.StateExact)
	requireCheckerCatches(t, tr)
}
