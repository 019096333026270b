package routing

// costTerms is one decision's cost function (doc.go, Cost): the
// configuration and the request, with the candidates' mean tracked
// requests for the cache falloff.
type costTerms struct {
	cost            Cost
	weight, falloff float64
	meanReqs        float64
	bs, isl         int64
}

// logit is the candidate's cost; lower is better.
func (t *costTerms) logit(rw *row) float64 {
	fbs := float64(t.bs)
	// The cached tokens the cost credits: a worker whose engine reports
	// fewer hits than predicted gets part of its overlap (rw.credit).
	cached := float64(min(int64(rw.ov)*t.bs, t.isl)) * rw.credit
	if t.cost == CostDynamo {
		return t.weight*((float64(rw.prefill+t.isl)-cached)/fbs) + float64(rw.blocks)
	}
	newBlocks := (float64(t.isl) - cached) / fbs
	return t.weight*(newBlocks+t.busy(rw.reqs)*cached/fbs) + float64(rw.prefill)/fbs + float64(rw.blocks)
}

// busy is the share of its cache credit a candidate tracking reqs
// requests loses: with r = (reqs + 1) / (mean + 1), 0 when r ≤ 1, else
// 1 − 1 / (1 + falloff × (r − 1)²) — the credit falls to
// weight / (1 + falloff × (r − 1)²) per cached block.
func (t *costTerms) busy(reqs int64) float64 {
	if t.falloff == 0 {
		return 0
	}
	x := (float64(reqs)+1)/(t.meanReqs+1) - 1
	if x <= 0 {
		return 0
	}
	k := t.falloff * x * x
	return k / (1 + k)
}
