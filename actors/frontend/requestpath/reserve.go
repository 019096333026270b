// Room kept for the higher priority bands: on every worker
// (FlowConfig.Headroom, shedAbove) or on a few workers of the fleet
// (FlowConfig.ReserveWorkers, reserved).
//
// The reserve is decided twice. First by the router, before it books:
// the route request carries the rule (api.RoomRule), so a request the
// reserve holds back is never booked, and no request routed meanwhile —
// the higher-band one the room is kept for — finds the worker it would
// have been booked on fuller than it is (actors/routing/room.go). The
// router counts every candidate; the path then checks again on the
// answer (reserved), leaving aside the workers its health checks and
// breakers refuse, and frees the booking of a request that check holds
// back. Backends that drop the rule (none in process) leave the second
// check alone.

package requestpath

import "github.com/kvrouter/kvrouter/messages"

// RoomLeft is how many ranks of fleet other than to have room: an
// engine not saturated and at most threshold blocks booked (threshold 0:
// no cap, every rank not saturated has room), as Overloaded counts room.
// It is the room a request sent to rank to leaves the higher bands
// (FlowConfig.ReserveWorkers).
func RoomLeft(fleet []Candidate, to messages.WorkerKey, threshold uint64) int {
	n := 0
	for _, c := range fleet {
		if c.Key != to && !c.Saturated && (threshold == 0 || c.BookedBlocks <= threshold) {
			n++
		}
	}
	return n
}

// shedAbove is the booked-blocks threshold for a request naming
// objective: limit less the headroom kept for the bands above its own
// (FlowConfig.Headroom); limit itself with flow control or headroom off.
func (g *Guard) shedAbove(objective string, limit uint64) uint64 {
	if g == nil || g.flowing == nil || g.flowing.cfg.Headroom == 0 || limit == 0 {
		return limit
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.flowing
	keep := uint64(f.bandsAbove(f.band(objective))) * f.cfg.Headroom
	if keep >= limit {
		return 1
	}
	return limit - keep
}

// bandsAbove is the number of known bands above band b: the configured
// objectives' and those SetObjectives found (g.mu held).
func (f *flowState) bandsAbove(b int) int {
	above := map[int]bool{}
	for _, bands := range []map[string]int{f.cfg.Objectives, f.found} {
		for _, v := range bands {
			if v > b {
				above[v] = true
			}
		}
	}
	return len(above)
}

// reserve is the number of ranks that must keep room for the bands above
// a request naming objective: FlowConfig.ReserveWorkers for each of them
// (0 with flow control or the reserve off, and for the highest band).
func (g *Guard) reserve(objective string) int {
	if g == nil || g.flowing == nil || g.flowing.cfg.ReserveWorkers == 0 {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.flowing
	return f.bandsAbove(f.band(objective)) * f.cfg.ReserveWorkers
}

// reserved reports whether a request must wait for the higher bands'
// reserve of keep ranks (Guard.reserve; 0: none, not looked at) (held):
// sent to the first of cands, it would leave fewer ranks of the fleet
// (all, less those unhealthy or whose breaker refuses) with room under
// the booked-blocks cap (left) than keep.
func (p *Path) reserved(all, cands []Candidate, keep int) (left int, held bool) {
	if keep == 0 || len(cands) == 0 {
		return 0, false
	}
	fleet := make([]Candidate, 0, len(all))
	for _, c := range all {
		if p.usable(c) == "" {
			fleet = append(fleet, c)
		}
	}
	left = RoomLeft(fleet, cands[0].Key, p.cfg.ShedAboveBlocks)
	return left, left < keep
}
