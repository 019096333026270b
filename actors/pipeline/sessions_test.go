package pipeline

import (
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/sessions"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
)

// sessionBarrier returns once the session index has every batch the
// engines' listeners delivered: Snapshot passes through the index's front,
// which forwards each batch to the session index before it answers, and a
// session request sent afterwards queues behind them.
func sessionBarrier(t *testing.T, p *Pipeline, ws []*simWorker) {
	t.Helper()
	quiesce(t, p, ws)
	if _, err := p.Snapshot(time.Second); err != nil {
		t.Fatal(err)
	}
}

// The session index follows the engines through the pipeline: a session's
// lineage is on the worker that stored it only, never points at a block the
// engine evicted, credits that worker, and goes with RemoveWorker and
// ForgetSession.
func TestSessionIndexFollowsTheEngines(t *testing.T) {
	ws := []*simWorker{
		newSimWorker(t, 1, simengine.EncodingVLLMMap, true, simengine.Options{}),
		newSimWorker(t, 2, simengine.EncodingSGLang, true, simengine.Options{}),
	}
	p := startSims(t, ws)
	// A conversation on each worker, each turn extending the last, with
	// other traffic in between (the caches hold 48 blocks: it evicts).
	var turn [2][]uint32
	for k := range 6 {
		for i, w := range ws {
			turn[i] = append(turn[i], make([]uint32, 8)...)
			for j := range turn[i][len(turn[i])-8:] {
				turn[i][len(turn[i])-8+j] = uint32(1_000_000*(i+1) + 100*k + j)
			}
			if _, err := w.eng.ServeRequest(simengine.Request{Tokens: turn[i], SessionID: []string{"conv-a", "conv-b"}[i]}); err != nil {
				t.Fatal(err)
			}
			w.serve(t, 3)
		}
	}
	sessionBarrier(t, p, ws)

	cands := []routing.Candidate{{Key: messages.WorkerKey{Worker: 1}}, {Key: messages.WorkerKey{Worker: 2}}}
	for i, id := range []string{"conv-a", "conv-b"} {
		s, found, err := p.Session(id, true, time.Second)
		if err != nil || !found {
			t.Fatalf("%s: found %v, %v", id, found, err)
		}
		truth := ws[i].truth()
		for _, h := range s.Holders {
			if h.Key.Worker != ws[i].stream.Worker {
				t.Errorf("%s: lineage on worker %d, which never served it", id, h.Key.Worker)
			}
			for _, b := range h.Chain {
				if _, ok := slices.BinarySearch(truth, b); !ok {
					t.Errorf("%s: lineage holds block %d, which the engine evicted", id, b)
				}
			}
		}
		bonus, err := p.SessionCredit(id, 1, cands, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(bonus) != 1 || bonus[0].Key.Worker != ws[i].stream.Worker || bonus[0].Blocks != s.Holders[0].Depth {
			t.Errorf("%s: credit %+v, holders %+v", id, bonus, s.Holders)
		}
	}

	p.RemoveWorker(1)
	if _, found, err := p.Session("conv-a", false, time.Second); err != nil || found {
		t.Errorf("conv-a after RemoveWorker(1): found %v, %v", found, err)
	}
	if found, err := p.ForgetSession("conv-b", time.Second); err != nil || !found {
		t.Errorf("forget conv-b: found %v, %v", found, err)
	}
	if found, err := p.ForgetSession("conv-b", time.Second); err != nil || found {
		t.Errorf("second forget of conv-b: found %v, %v", found, err)
	}
	st, err := p.SessionStats(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Events == 0 || st.Reasons[sessions.ReasonCleared] == 0 {
		t.Errorf("session stats: %+v", st)
	}
}
