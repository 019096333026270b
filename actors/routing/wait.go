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
// With Config.PredictedWaitFalloff the credit of a candidate's predicted
// blocks (Overlap.Predicted, the part of its overlap no event confirmed) is
// multiplied by
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
// The falloff is off by default (0: predicted blocks in full). Measured
// (bench/README.md, "Predicted blocks still to prefill"), falloff 1 lowers
// the burst workload's TTFT at 64 and 1,000 workers and the conversations'
// at 1,000, and costs up to 1 % in mean at 16 workers.
//
// # Wait or recompute (Config.PredictedWaitCheck, on by default)
//
// The falloff weighs the waiting by counts; the check weighs it per
// candidate, in the cost's own terms. A request sent to candidate c, whose
// overlap is a prediction still to prefill, reaches its first token after
// c's queued prefill (the booked prefill tokens of the requests routed
// there before it, the first siblings' among them) plus the tokens c
// still lacks; on an idle candidate (no request in flight, in the
// preference tier that can win: not saturated, the LoRA affinity) after
// that candidate's queued prefill (0 unless another host booked some) plus
// the whole request. Both are tokens of prefill ahead of the first token,
// so no prefill rate enters:
//
//	saved = (queued_c + isl − cached_c) − (queued_idle + isl)
//
// Recomputing is not free: it adds the predicted tokens to the fleet's
// work, and the idle candidates are the fleet's spare capacity for it.
// The predicted blocks earn no credit when
//
//	saved × spare > predicted_tokens
//
// spare being the idle candidates of that tier: the time saved exceeds the
// recompute's share of each. A thousand workers under a burst have
// hundreds idle, so a sibling that would wait behind the first one's
// suffix and the earlier siblings' goes to an idle worker; sixteen have a
// few at most, so the burst stays together unless the wait is long. With
// no idle candidate the queue is everywhere and the credit stays. A
// prediction whose prefill is done (its events still to come) has nothing
// queued ahead and keeps its credit; so do identical siblings (nothing to
// save). Candidates left without credit are counted (Router.WaitWithheld,
// kvrouter_predicted_wait_withheld_total). Measured in bench/README.md
// ("Wait or recompute").

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
