package routing

import "math"

// Predicted blocks that are still to be prefilled.
//
// A prediction says a worker will hold a request's blocks once its prefill
// has run there (predict.go). Until an event confirms them, every sibling
// routed after the first to the same worker waits behind the prefills
// already queued there for that prefix: its blocks are a cache hit only
// once those have run. With idle candidates elsewhere, sending one more
// sibling to the predicted worker can cost more time-to-first-token than
// prefilling the prefix again on an idle one, and the more siblings
// already wait there, the likelier that is. With every candidate busy,
// the queue is everywhere and co-locating still wins.
//
// So the credit of a candidate's predicted blocks (Overlap.Predicted, the
// part of its overlap no event confirmed) is multiplied by
//
//	1 / (1 + waiting × idle / PredictedWaitFalloff)
//
// waiting being the requests routed there with the same block 0 since an
// event last confirmed it (Overlap.Waiting), idle the share of candidates
// with no request at all (none booked in prefill or decode, by this host
// or another, and no outside load). Confirmed blocks keep their full
// credit. Idle counts requests, not queued prefill: a small busy fleet
// often has no prefill queued between prefills while its engines decode,
// and a term reading that as room spread bursts there that co-locating
// would have served as well (kvrouter demo lost 7 points of hit rate and
// a quarter of its TTFT p50 with it; about a point with this one).
//
// It is off by default (0: predicted blocks in full). Measured
// (bench/README.md, "Predicted blocks still to prefill"), falloff 1 lowers
// the burst workload's TTFT at 64 and 1,000 workers and the conversations'
// at 1,000, and costs up to 1 % in mean at 16 workers; a default needs
// more workloads than the bench's three. A term that weighs, per
// candidate, the wait behind its queued prefill against a full prefill
// elsewhere is the next step.

// discountWaiting lowers rows[i].credit for the candidates whose overlap
// is a prediction still to be prefilled. ov is resolveOverlaps' result: an
// overlap applies only where it is the candidate's largest (the one
// Decide scores). isl and bs are the request's input length and block
// size, tier the lowest preference tier (the candidates that can win).
func (r *Router) discountWaiting(overlaps []Overlap, cands []Candidate, ov []uint32, rows []row, isl, bs int64, tier uint8) {
	r.waiting = r.waiting[:0]
	for _, o := range overlaps {
		if o.Waiting > 0 && o.Predicted > 0 {
			r.waiting = append(r.waiting, o)
		}
	}
	if len(r.waiting) == 0 {
		return
	}
	idle, spare := 0, 0                // idle candidates, and those of the winning tier
	idleQueued := int64(math.MaxInt64) // the least queued idle candidate of the winning tier
	for i := range rows {
		if rows[i].reqs == 0 {
			idle++
			if rows[i].tier == tier {
				spare++
				idleQueued = min(idleQueued, rows[i].prefill)
			}
		}
	}
	if idle == 0 {
		return
	}
	falloff := r.cfg.PredictedWaitFalloff
	check := r.cfg.PredictedWaitCheck && spare > 0
	share := float64(idle) / float64(len(rows))
	for i := range cands {
		if ov[i] == 0 {
			continue
		}
		for _, o := range r.waiting {
			if o.Key != cands[i].Key || o.Blocks != ov[i] {
				continue
			}
			total := float64(ov[i])
			pred := float64(min(o.Predicted, ov[i]))
			keep := 1.0
			if check && recomputePays(&rows[i], isl, bs, idleQueued, min(int64(pred)*bs, isl), spare) {
				keep = 0
				r.withheld++
			}
			if falloff > 0 {
				keep /= 1 + float64(o.Waiting)*share/falloff
			}
			rows[i].credit *= (total - pred + pred*keep) / total
			break
		}
	}
}

// WaitWithheld counts the candidates whose predicted blocks
// Config.PredictedWaitCheck left without credit (it only grows).
func (r *Router) WaitWithheld() uint64 { return r.withheld }

// recomputePays says whether prefilling the request whole on an idle
// candidate beats waiting on rw for the predicted tokens predTokens. The
// time it saves is rw's queued prefill plus the tokens rw still lacks (its
// overlap at the credit it has so far) minus idleQueued (the idle
// candidate's booked prefill, 0 unless another host booked some) plus
// isl: both tokens of prefill ahead of the first token, so no prefill rate
// enters. The recompute adds predTokens of prefill to the fleet's spare
// capacity, the spare idle candidates: it pays when the time saved exceeds
// that work's share of each, predTokens / spare.
func recomputePays(rw *row, isl, bs, idleQueued, predTokens int64, spare int) bool {
	cached := float64(min(int64(rw.ov)*bs, isl)) * rw.credit
	saved := float64(rw.prefill) + float64(isl) - cached - float64(idleQueued+isl)
	return saved > 0 && saved*float64(spare) > float64(predTokens)
}
