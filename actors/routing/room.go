// Room kept for higher priority bands, decided before booking.
//
// The request path's flow control may keep room on a few ranks of the
// fleet for the bands above a request's (api.RoomRule). It could check
// that after the route, from the candidates' loads in the answer, but the
// route has booked the request by then: until the path frees that booking,
// every request routed meanwhile — the higher-band one the room was kept
// for included — sees the rank it was booked on as fuller than it is, and
// may find no room. So the rule travels with the request and Route applies
// it between the decision and the booking, on the loads the decision was
// scored with (this router's bookings, other hosts' and the engines'
// outside load, and the engines' saturation). A request it refuses leaves
// no trace: nothing booked, nothing predicted.
//
// The rule counts every candidate. The path's own check after the route
// remains and may refuse more: it leaves aside the ranks its health checks
// or circuit breakers refuse, and those outside a request's subset, which
// the router does not know.

package routing

import (
	"fmt"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// keepRoom applies rule to the decision for chosen, on the rows of the
// Decide that made it: nil when it may be booked, else an
// api.ErrRoomKept error saying how many ranks had room.
func (r *Router) keepRoom(rule api.RoomRule, cands []Candidate, chosen messages.WorkerKey) error {
	if rule.Ranks <= 0 {
		return nil
	}
	left := 0
	for i := range cands {
		row := &r.rows[i]
		if cands[i].Key != chosen && !row.sat && (rule.AboveBlocks == 0 || uint64(max(row.blocks, 0)) <= rule.AboveBlocks) {
			left++
		}
	}
	if left < rule.Ranks {
		return fmt.Errorf("routing: %w: %d ranks besides worker %d rank %d have room, %d kept", api.ErrRoomKept, left, chosen.Worker, chosen.DpRank, rule.Ranks)
	}
	return nil
}
