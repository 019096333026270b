package decisionlog

import (
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

func TestRingKeepsTheNewestFirst(t *testing.T) {
	l := New(3)
	for w := 1; w <= 5; w++ {
		l.Record(api.Decision{WorkerID: messages.WorkerID(w)}, nil)
	}
	s := l.Snapshot()
	if s.Capacity != 3 || s.Recorded != 5 || s.Skipped != 0 || len(s.Decisions) != 3 {
		t.Fatalf("snapshot %+v", s)
	}
	for i, want := range []messages.WorkerID{5, 4, 3} {
		if got := s.Decisions[i].WorkerID; got != want {
			t.Errorf("decision %d: worker %d, want %d", i, got, want)
		}
		if s.Decisions[i].Scores == nil {
			t.Errorf("decision %d: scores nil, want [] (JSON [])", i)
		}
	}
}

func TestBestScoresByLogit(t *testing.T) {
	l := New(2)
	var scores []api.RouteScore
	for w, logit := range []float64{9, 3, 12, 1, 7, 5, 11, 2, 8, 4, 10, 6} {
		scores = append(scores, api.RouteScore{WorkerID: messages.WorkerID(w), Logit: logit})
	}
	l.Record(api.Decision{}, scores)
	d := l.Snapshot().Decisions[0]
	if d.Candidates != 12 || len(d.Scores) != api.DecisionScores {
		t.Fatalf("candidates %d, scores %d", d.Candidates, len(d.Scores))
	}
	for i, s := range d.Scores {
		if s.Logit != float64(i+1) {
			t.Errorf("score %d: logit %v, want %d (lowest first)", i, s.Logit, i+1)
		}
	}
	// A later decision reuses no caller memory and leaves the copy alone.
	scores[0].Logit = -1
	l.Record(api.Decision{}, scores[:3])
	if d.Scores[0].Logit != 1 {
		t.Errorf("an earlier snapshot changed: %v", d.Scores[0].Logit)
	}
	if got := l.Snapshot().Decisions[0].Scores; len(got) != 3 || got[0].Logit != -1 || got[2].Logit != 12 {
		t.Errorf("three candidates: %+v", got)
	}
}

// A writer never waits: with the ring held, the decision is dropped and
// counted; the token totals count it all the same.
func TestBusyRingSkips(t *testing.T) {
	l := New(4)
	l.mu.Lock()
	l.Record(api.Decision{WorkerID: 1, PromptTokens: 100, CachedTokens: 60}, nil)
	l.mu.Unlock()
	l.Record(api.Decision{WorkerID: 2, PromptTokens: 50, CachedTokens: 10}, nil)
	s := l.Snapshot()
	if s.Skipped != 1 || s.Recorded != 1 || len(s.Decisions) != 1 || s.Decisions[0].WorkerID != 2 ||
		s.PromptTokens != 150 || s.CachedTokens != 70 {
		t.Errorf("snapshot %+v", s)
	}
}

func TestConcurrentWritersAndReaders(t *testing.T) {
	l := New(16)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				l.Record(api.Decision{WorkerID: messages.WorkerID(g*1000 + i)}, []api.RouteScore{{Logit: float64(i)}})
				if i%50 == 0 {
					_ = l.Snapshot()
				}
			}
		})
	}
	wg.Wait()
	s := l.Snapshot()
	if s.Recorded+s.Skipped != 2000 || len(s.Decisions) != 16 {
		t.Errorf("recorded %d + skipped %d, want 2000; %d kept", s.Recorded, s.Skipped, len(s.Decisions))
	}
}
