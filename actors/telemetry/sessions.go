package telemetry

import "github.com/kvrouter/kvrouter/actors/sessions"

// sessionUnit is what a session-index reason counts (each sessions.Reason
// names its unit): one counter family per unit, so that a family's sum
// means something.
type sessionUnit uint8

const (
	unitEvents   sessionUnit = iota // kvrouter_session_events_total
	unitSessions                    // kvrouter_sessions_dropped_total
	unitLineages                    // kvrouter_session_lineages_dropped_total
	unitBlocks                      // kvrouter_session_blocks_dropped_total
	unitCount
)

// sessionUnits maps every reason but ReasonNone (not counted) to its unit;
// a test checks that every reason is mapped.
var sessionUnits = map[sessions.Reason]sessionUnit{
	sessions.ReasonInvalidSessionID:  unitEvents,
	sessions.ReasonUnknownParent:     unitEvents,
	sessions.ReasonConflictingParent: unitEvents,
	sessions.ReasonCycle:             unitEvents,
	sessions.ReasonUnattributed:      unitEvents,
	sessions.ReasonEvicted:           unitSessions,
	sessions.ReasonExpired:           unitSessions,
	sessions.ReasonHolderDropped:     unitLineages,
	sessions.ReasonCleared:           unitLineages,
	sessions.ReasonDepthDropped:      unitBlocks,
	sessions.ReasonPruned:            unitBlocks,
}

// sessionReadings are the session indexes' figures, summed over
// namespaces: what they hold now, and their reasons by unit (every reason
// present, zero included, so an operator sees the full set at once).
type sessionReadings struct {
	held, lineages, blocks float64
	reasons                [unitCount]series
}

func newSessionReadings() sessionReadings {
	var r sessionReadings
	for u := range r.reasons {
		r.reasons[u] = series{}
	}
	for reason, u := range sessionUnits {
		r.reasons[u].add(0, labelReason.String(reason.String()))
	}
	return r
}

func (r *sessionReadings) add(s *sessions.Stats) {
	r.held += float64(s.Sessions)
	r.lineages += float64(s.Lineages)
	r.blocks += float64(s.Blocks)
	for reason, u := range sessionUnits {
		r.reasons[u].add(float64(s.Reasons[reason]), labelReason.String(reason.String()))
	}
}
