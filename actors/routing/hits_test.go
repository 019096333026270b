package routing

import (
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/actors/routing/hitcheck"
)

// The prediction check through the route actor: A holds the longer
// prefix in the index, but its engine keeps reporting no hits for the
// requests routed there (its events are lost). Once the check flags it,
// its overlap is discounted and B, which holds a little less and whose
// engine agrees, wins; the credit survives the next candidate snapshot,
// and A's credit comes back once its reports agree again.
func TestActorDiscountsAWorkerWhoseEngineDisagrees(t *testing.T) {
	system, pid := spawnRouteActor(t)
	A, B := wk(1, 0), wk(2, 0)
	ask := asker(t, system, pid)
	n := 0
	route := func() Decision { // routed and freed at once: load never decides
		t.Helper()
		n++
		id := fmt.Sprint("r", n)
		r := ask(&RouteRequest{Request: Request{ID: id, ISL: 256, BlockSize: 16},
			Overlaps: []Overlap{{Key: A, Blocks: 16}, {Key: B, Blocks: 12}}}).(*RouteReply)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if f := ask(&Bookkeeping{ID: id, Free: true}).(*BookkeepingReply); f.Err != nil {
			t.Fatal(f.Err)
		}
		return r.Decision
	}
	report := func(k, predicted, reported uint64) {
		for range k {
			system.Root.Send(pid, &HitReport{Report: hitcheck.Report{Key: A, Predicted: predicted, Reported: reported, PromptTokens: 256}})
		}
	}
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: A}, {Key: B}}})
	if d := route(); d.Worker != A {
		t.Fatalf("before any report: routed to %v, want A (the longer overlap)", d.Worker)
	}
	report(hitcheck.DefaultWindow, 256, 0)
	st := ask(&HitStatsRequest{}).(*HitStatsReply)
	if len(st.Workers) != 1 || st.Workers[0].Key != A || !st.Workers[0].Flagged || st.Workers[0].Credit != hitcheck.DefaultMinCredit {
		t.Fatalf("stats after %d missed reports: %+v", hitcheck.DefaultWindow, st.Workers)
	}
	if d := route(); d.Worker != B {
		t.Fatalf("A flagged: routed to %v, want B", d.Worker)
	}
	if d := route(); d.OverlapBlocks == 0 {
		t.Fatalf("the decision's overlap is the index's, not discounted: %+v", d)
	}
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: A}, {Key: B}}}) // the next snapshot
	if d := route(); d.Worker != B {
		t.Fatalf("after a new candidate snapshot: routed to %v, want B (the credit kept)", d.Worker)
	}
	report(hitcheck.DefaultWindow, 256, 256)
	if st := ask(&HitStatsRequest{}).(*HitStatsReply); st.Workers[0].Flagged || st.Workers[0].Credit != 1 {
		t.Fatalf("A's reports agree again: %+v", st.Workers[0])
	}
	if d := route(); d.Worker != A {
		t.Fatalf("A cleared: routed to %v, want A again", d.Worker)
	}
}
