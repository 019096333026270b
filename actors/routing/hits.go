package routing

import (
	"github.com/kvrouter/kvrouter/actors/routing/hitcheck"
	"github.com/kvrouter/kvrouter/messages"
)

// HitReport tells the route actor what the engine reported serving from
// cache for a request it routed (package hitcheck): the route actor
// checks its predictions with it and discounts the overlap of a worker
// whose reports stay far below them. Fire and forget (no reply).
type HitReport struct{ Report hitcheck.Report }

// HitStatsRequest asks the route actor for its prediction check; the
// reply is a *HitStatsReply.
type HitStatsRequest struct{}

// HitStatsReply is the route actor's prediction check: one entry per
// worker with reports, the distribution of the errors and their sum, and the reports
// dropped past the worker cap.
type HitStatsReply struct {
	Workers  []hitcheck.WorkerStats
	Errors   [len(hitcheck.ErrorBounds) + 1]uint64
	ErrorSum float64
	Dropped  uint64
}

// hitCheck is the route actor's prediction check and the credits it
// gives the candidates.
type hitCheck struct{ t *hitcheck.Tracker }

func newHitCheck() *hitCheck { return &hitCheck{t: hitcheck.New(hitcheck.Config{})} }

// observe takes a report and updates the reported worker's candidate;
// changed says its credit moved.
func (h *hitCheck) observe(r hitcheck.Report, cands []Candidate, index map[messages.WorkerKey]int) (changed bool) {
	v := h.t.Observe(r)
	if i, ok := index[r.Key]; ok && v.Changed {
		cands[i].HitCredit = v.Credit
		return true
	}
	return false
}

// apply gives every candidate its current credit (a new candidate list
// replaced the old one).
func (h *hitCheck) apply(cands []Candidate) {
	for i := range cands {
		cands[i].HitCredit = h.t.Credit(cands[i].Key)
	}
}

func (h *hitCheck) stats() *HitStatsReply {
	return &HitStatsReply{Workers: h.t.Stats(), Errors: h.t.Errors, ErrorSum: h.t.ErrorSum, Dropped: h.t.Dropped}
}
