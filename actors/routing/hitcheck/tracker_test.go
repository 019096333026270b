package hitcheck

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

var w1, w2 = messages.WorkerKey{Worker: 1}, messages.WorkerKey{Worker: 2}

// feed sends n reports of a worker and returns the last verdict and the
// number of the report that first flagged it (0: none did).
func feed(tr *Tracker, k messages.WorkerKey, n int, predicted, reported uint64) (v Verdict, flaggedAt int) {
	for i := 1; i <= n; i++ {
		v = tr.Observe(Report{Key: k, Predicted: predicted, Reported: reported, PromptTokens: 2 * predicted})
		if v.Flagged && v.Changed && flaggedAt == 0 {
			flaggedAt = i
		}
	}
	return v, flaggedAt
}

func TestAgreeingWorkerIsNeverFlagged(t *testing.T) {
	tr := New(Config{})
	if v, at := feed(tr, w1, 200, 1024, 1024); v.Flagged || at != 0 || v.Credit != 1 {
		t.Fatalf("agreeing worker: %+v (flagged at %d)", v, at)
	}
	// Engines round to their own block size: a little below is fine.
	if v, _ := feed(tr, w2, 200, 1024, 900); v.Flagged {
		t.Fatalf("worker at 88%% of its predictions flagged: %+v", v)
	}
}

func TestLostEventsFlagWithinABoundedNumberOfReports(t *testing.T) {
	tr := New(Config{})
	feed(tr, w1, 50, 1024, 1024)
	// Its events are lost from here: the index keeps predicting hits the
	// engine no longer has.
	v, at := feed(tr, w1, DefaultWindow, 1024, 0)
	if !v.Flagged || at == 0 || at > DefaultWindow {
		t.Fatalf("after %d missed reports: %+v, flagged at report %d", DefaultWindow, v, at)
	}
	// More than half the window missed when it flags (ratio below 0.5).
	if at <= DefaultWindow/2 {
		t.Errorf("flagged after %d of %d reports: too early for the 0.5 rule", at, DefaultWindow)
	}
	if v.Credit != DefaultMinCredit {
		t.Errorf("credit %v with every report missed, want the floor %v", v.Credit, DefaultMinCredit)
	}
	if tr.Credit(w1) != v.Credit || tr.Credit(w2) != 1 {
		t.Errorf("Credit(w1) %v, Credit(w2) %v", tr.Credit(w1), tr.Credit(w2))
	}
}

func TestCreditFollowsTheRatioAndClearsWithHysteresis(t *testing.T) {
	tr := New(Config{Window: 10, MinPredicted: 1})
	v, _ := feed(tr, w1, 10, 100, 40) // ratio 0.4
	if !v.Flagged || v.Credit != 0.4 {
		t.Fatalf("ratio 0.4: %+v, want flagged with credit 0.4", v)
	}
	v, _ = feed(tr, w1, 10, 100, 70) // ratio 0.7: between the lines, stays flagged
	if !v.Flagged || v.Credit != 0.7 {
		t.Fatalf("ratio 0.7 while flagged: %+v, want still flagged, credit 0.7", v)
	}
	v, _ = feed(tr, w1, 10, 100, 85)
	if v.Flagged || v.Credit != 1 {
		t.Fatalf("ratio 0.85: %+v, want cleared with credit 1", v)
	}
	v, _ = feed(tr, w1, 10, 100, 70) // 0.7 while clear: not flagged
	if v.Flagged {
		t.Fatalf("ratio 0.7 while clear: %+v", v)
	}
}

func TestReportsAboveThePredictionNeitherFlagNorMask(t *testing.T) {
	tr := New(Config{Window: 10, MinPredicted: 1})
	// The engine holds more than the index knew: fine.
	if v, _ := feed(tr, w1, 10, 100, 500); v.Flagged || v.Credit != 1 {
		t.Fatalf("over-reporting worker: %+v", v)
	}
	// Half the requests way over, half missed: the misses still show.
	for range 5 {
		tr.Observe(Report{Key: w2, Predicted: 100, Reported: 1000})
		tr.Observe(Report{Key: w2, Predicted: 100, Reported: 0})
	}
	if v := tr.Observe(Report{Key: w2, Predicted: 100, Reported: 0}); !v.Flagged {
		t.Fatalf("misses masked by over-reports: %+v", v)
	}
}

func TestNothingPredictedTellsNothing(t *testing.T) {
	tr := New(Config{Window: 4, MinPredicted: 1})
	feed(tr, w1, 4, 100, 0)
	if tr.Credit(w1) == 1 {
		t.Fatal("not flagged after 4 misses")
	}
	// Cold requests (nothing predicted) do not push the misses out.
	feed(tr, w1, 100, 0, 0)
	if tr.Credit(w1) == 1 {
		t.Fatal("cold requests cleared the flag")
	}
	st := tr.Stats()
	if len(st) != 1 || st[0].Reports != 104 || st[0].PredictedTokens != 400 || !st[0].Judged || !st[0].Flagged {
		t.Fatalf("stats %+v", st)
	}
}

func TestUnjudgedBelowMinPredicted(t *testing.T) {
	tr := New(Config{})
	// Three short prompts all missed: not enough predicted tokens to judge.
	if v, _ := feed(tr, w1, 3, 64, 0); v.Flagged {
		t.Fatalf("flagged on %d predicted tokens: %+v", 3*64, v)
	}
	if st := tr.Stats(); st[0].Judged {
		t.Fatalf("judged below MinPredicted: %+v", st[0])
	}
}

func TestBoundedWorkersAndForgetWorker(t *testing.T) {
	tr := New(Config{MaxWorkers: 1})
	tr.Observe(Report{Key: w1, Predicted: 1})
	if v := tr.Observe(Report{Key: w2, Predicted: 1}); v.Flagged || v.Credit != 1 || tr.Dropped != 1 {
		t.Fatalf("second worker past the cap: %+v, dropped %d", v, tr.Dropped)
	}
	tr.ForgetWorker(w1.Worker)
	tr.Observe(Report{Key: w2, Predicted: 1})
	if st := tr.Stats(); len(st) != 1 || st[0].Key != w2 {
		t.Fatalf("after Forget: %+v", st)
	}
}

func TestErrorDistribution(t *testing.T) {
	tr := New(Config{})
	tr.Observe(Report{Key: w1, Predicted: 100, Reported: 100, PromptTokens: 200}) // 0
	tr.Observe(Report{Key: w1, Predicted: 100, Reported: 0, PromptTokens: 200})   // -0.5
	tr.Observe(Report{Key: w1, Predicted: 0, Reported: 150, PromptTokens: 200})   // +0.75
	tr.Observe(Report{Key: w1, Predicted: 10, Reported: 0})                       // no prompt: not counted
	want := map[int]uint64{1: 1, 5: 1, 9: 1}                                      // le -0.5, le 0.01, le 1
	for i, n := range tr.Errors {
		if n != want[i] {
			t.Errorf("bucket %d (le %v): %d, want %d", i, bound(i), n, want[i])
		}
	}
}

func bound(i int) any {
	if i < len(ErrorBounds) {
		return ErrorBounds[i]
	}
	return "+Inf"
}
