package routing

import (
	"errors"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing/disagg"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Prefill/decode disaggregation (package disagg): a namespace whose
// candidates carry roles is split into a decode pool (decode and both
// roles, scored by the cost as every namespace is) and a prefill pool
// (prefill roles, chosen by disagg). A split request is booked twice
// under its id: its blocks on the decode worker (no prefill tokens: the
// decode worker receives the KV cache), its prefill tokens on the prefill
// worker, in the Router's prefill table, until PrefillDone or Free.

// Roles reports whether any candidate has a role other than both: only
// then is a namespace disaggregated at all.
func Roles(cands []Candidate) bool {
	for i := range cands {
		if api.RoleOf(cands[i].Role) != api.RoleBoth {
			return true
		}
	}
	return false
}

// Pools appends cands' decode pool (decode and both roles) to decode and
// their prefill pool (prefill roles) to prefill, in candidate order.
func Pools(cands, decode, prefill []Candidate) ([]Candidate, []Candidate) {
	for _, c := range cands {
		if c.Role == api.RolePrefill {
			prefill = append(prefill, c)
		} else {
			decode = append(decode, c)
		}
	}
	return decode, prefill
}

// PrefillLoad is the bookkeeping of split requests' prefill legs (keyed
// by the request id, like Load).
func (r *Router) PrefillLoad() *Load { return r.pre }

// RouteSplit is Route for a disaggregated namespace: the decode worker is
// chosen among decode by the cost, then disagg decides whether to split
// and picks the prefill worker among prefill. Decision.PrefillTokens is
// 0 when split (the prefill tokens are the outcome's, booked on its
// prefill worker). Errors are Route's; with ErrFull the decision and
// outcome are valid, only untracked.
func (r *Router) RouteSplit(req Request, overlaps []Overlap, decode, prefill []Candidate, now time.Time) (Decision, disagg.Outcome, error) {
	r.load.Expire(now)
	r.pre.Expire(now)
	if err := r.load.CheckID(req.ID); err != nil {
		r.countBadID(err)
		return Decision{}, disagg.Outcome{}, err
	}
	if err := r.pre.CheckID(req.ID); err != nil {
		r.countBadID(err)
		return Decision{}, disagg.Outcome{}, err
	}
	d, o, err := r.DecideSplit(req, overlaps, decode, prefill)
	if err != nil {
		return Decision{}, disagg.Outcome{}, err
	}
	if err := r.load.Add(req.ID, d.Worker, d.PrefillTokens, d.RequestBlocks, now); err != nil {
		return d, o, err
	}
	if o.Split {
		if err := r.pre.Add(req.ID, o.Prefill, o.PrefillTokens, 0, now); err != nil {
			_ = r.load.Free(req.ID) // both legs or neither
			return d, o, err
		}
	}
	return d, o, nil
}

// DecideSplit is RouteSplit's decision without booking.
func (r *Router) DecideSplit(req Request, overlaps []Overlap, decode, prefill []Candidate) (Decision, disagg.Outcome, error) {
	d, err := r.Decide(req, overlaps, decode)
	if err != nil {
		return Decision{}, disagg.Outcome{}, err
	}
	ps := make([]disagg.Prefill, len(prefill))
	ov := r.resolveOverlaps(overlaps, prefill)
	h := requestHash(req)
	for i, c := range prefill {
		ps[i] = disagg.Prefill{Key: c.Key, QueuedTokens: r.pre.Of(c.Key).PrefillTokens + c.Remote.PrefillTokens,
			Saturated: c.Reported.Saturated, Tie: tieHash(h, c.Key)}
		if ov != nil {
			ps[i].OverlapBlocks = ov[i]
		}
	}
	o := disagg.Decide(r.cfg.Disagg, disagg.Request{ISL: int64(req.ISL), BlockSize: int64(req.BlockSize)},
		disagg.Decode{Key: d.Worker, CachedTokens: d.CachedTokens}, ps)
	if o.Split {
		d.PrefillTokens = 0
	}
	return d, o, nil
}

// countBadID counts a refused request id as Route does.
func (r *Router) countBadID(err error) {
	if errors.Is(err, ErrDuplicateRequest) {
		r.load.stats.Duplicate++
	} else {
		r.load.stats.InvalidID++
	}
}

// held is the load booked on key by this Router, in both tables (a key
// is in at most one of them unless its role changed).
func (r *Router) held(key messages.WorkerKey) RankLoad {
	l, p := r.load.Of(key), r.pre.Of(key)
	l.PrefillTokens += p.PrefillTokens
	l.Blocks += p.Blocks
	l.PrefillRequests += p.PrefillRequests
	l.DecodeRequests += p.DecodeRequests
	return l
}

// FreePrefill frees a request's prefill leg, if it has one (PrefillDone
// and Free of the request both do): the load it released, zero when none.
func (r *Router) FreePrefill(id string) RankLoad {
	h, ok := r.pre.Held(id)
	if !ok || r.pre.Free(id) != nil {
		return RankLoad{}
	}
	return h
}
