package routing

import (
	"math"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
)

// sample draws one candidate with probability softmax(−norm/T), where
// norm = (logit − min) / (max − min) (all equal: uniform). It races
// exponential clocks: the winner is the argmin of E_i × exp(norm_i/T) with
// E_i = −ln U_i (the Gumbel-max trick in product form), U_i derived from one
// Rand draw and the candidate's key, so the draw does not depend on the
// candidates' order. Exact ties fall back to the temperature-0 order.
// Only candidates of the lowest preference tier are drawn (reported.go).
func (r *Router) sample(rows []row, cands []Candidate, reqHash uint64, tier uint8) int {
	lo, span := logitRange(rows, tier)
	t := r.cfg.Temperature
	seed := r.rng.Uint64()
	best, bestKey := -1, 0.0
	for i := range rows {
		if rows[i].tier > tier {
			continue
		}
		u := unitOpen(mix64(seed ^ keyHash(cands[i].Key)))
		nrm := normalized(rows[i].logit, lo, span)
		// Pruning, exact: −ln u ≥ 1 − u and exp(x) ≥ 1 + x, so a candidate
		// whose lower bound exceeds the best key (with a margin for
		// rounding) cannot win, and its log and exp are skipped.
		if best >= 0 && (1-u)*(1+nrm/t)*(1-1e-9) > bestKey {
			continue
		}
		k := -math.Log(u)
		if nrm > 0 {
			k *= math.Exp(nrm / t) // +Inf for a vanishing t: never chosen over a minimum
		}
		if best < 0 || k < bestKey ||
			(k == bestKey && rowBetter(&rows[i], &rows[best], cands[i].Key, cands[best].Key, reqHash)) {
			best, bestKey = i, k
		}
	}
	return best
}

// logitRange returns the lowest logit and max − min of the rows of
// preference tier tier.
func logitRange(rows []row, tier uint8) (lo, span float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range rows {
		if rows[i].tier == tier {
			lo, hi = min(lo, rows[i].logit), max(hi, rows[i].logit)
		}
	}
	return lo, hi - lo
}

// normalized is the min-max normalised logit in [0, 1] (0 when all logits
// are equal). Dividing it by the temperature afterwards keeps a tiny
// temperature from producing 0 × Inf.
func normalized(logit, lo, span float64) float64 {
	if span <= 0 {
		return 0
	}
	return (logit - lo) / span
}

// rowBetter is the temperature-0 order (without the logit) for the
// measure-zero case of equal sampled keys.
func rowBetter(a, b *row, ak, bk messages.WorkerKey, h uint64) bool {
	if a.logit != b.logit {
		return a.logit < b.logit
	}
	if a.blocks != b.blocks {
		return a.blocks < b.blocks
	}
	if a.prefill != b.prefill {
		return a.prefill < b.prefill
	}
	ta, tb := tieHash(h, ak), tieHash(h, bk)
	if ta != tb {
		return ta < tb
	}
	return keyLess(ak, bk)
}

// requestHash is Request.Hash, or XXH3-64(ID) when Hash is 0.
func requestHash(req Request) uint64 {
	if req.Hash != 0 {
		return req.Hash
	}
	return xxh3.HashString(req.ID)
}

// keyHash mixes a (worker, dp_rank) into 64 bits:
// mix64(worker XOR mix64(dp_rank + 0x9E3779B97F4A7C15)).
func keyHash(k messages.WorkerKey) uint64 {
	return mix64(uint64(k.Worker) ^ mix64(uint64(k.DpRank)+0x9E3779B97F4A7C15))
}

// tieHash is the request-specific rank of a candidate among equals:
// mix64(requestHash XOR keyHash(key)); lower wins.
func tieHash(h uint64, k messages.WorkerKey) uint64 {
	return mix64(h ^ keyHash(k))
}

// mix64 is the SplitMix64 finalizer (a bijection on 64 bits).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// unitOpen maps 64 random bits to a float64 in (0, 1).
func unitOpen(x uint64) float64 {
	return (float64(x>>11) + 0.5) / (1 << 53)
}

// keyLess orders keys by worker id, then dp rank.
func keyLess(a, b messages.WorkerKey) bool {
	if a.Worker != b.Worker {
		return a.Worker < b.Worker
	}
	return a.DpRank < b.DpRank
}
