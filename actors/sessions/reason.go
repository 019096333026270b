package sessions

// Reason is one thing that can happen to the session index. The set is
// closed: every value is a bounded metrics label. Stats counts each reason
// in the unit its comment names. The first five are the errors the issue
// asks for; the rest are bookkeeping.
type Reason uint8

// Reasons.
const (
	ReasonNone Reason = iota // events: applied with nothing to report (not counted)

	ReasonInvalidSessionID  // events: a stored event whose session id is longer than MaxIDLen bytes or has a byte outside printable ASCII (0x21–0x7E); treated as unattributed
	ReasonUnknownParent     // events: stored chain whose parent the session's lineage on that stream does not hold; kept as a new segment
	ReasonConflictingParent // events: a block the lineage holds stored again under another parent; the rest of the event is ignored
	ReasonCycle             // events: a block stored under itself or under one of its own descendants; the rest of the event is ignored
	ReasonEvicted           // sessions: least recently stored session dropped for MaxSessions or MaxBlocks

	ReasonUnattributed  // events: stored events without a session id (no lineage change)
	ReasonExpired       // sessions: dropped by Expire after IdleTTL without a store
	ReasonHolderDropped // lineages: a session's oldest (worker, dp_rank) lineage dropped for MaxHolders
	ReasonDepthDropped  // blocks: oldest lineage blocks dropped for MaxDepth
	ReasonPruned        // blocks: lineage blocks dropped by a Removed event (with their descendants)
	ReasonCleared       // lineages: dropped by a Cleared event or DropWorker

	ReasonCount // number of reasons
)

var reasonNames = [ReasonCount]string{
	ReasonNone:              "ok",
	ReasonInvalidSessionID:  "invalid_session_id",
	ReasonUnknownParent:     "unknown_parent",
	ReasonConflictingParent: "conflicting_parent",
	ReasonCycle:             "cycle",
	ReasonEvicted:           "evicted",
	ReasonUnattributed:      "unattributed",
	ReasonExpired:           "expired",
	ReasonHolderDropped:     "holder_dropped",
	ReasonDepthDropped:      "depth_dropped",
	ReasonPruned:            "pruned",
	ReasonCleared:           "cleared",
}

// String returns the reason's snake_case label.
func (r Reason) String() string {
	if r < ReasonCount {
		return reasonNames[r]
	}
	return "invalid_reason"
}

// Stats are the index's counters and gauges.
type Stats struct {
	// Events counts Apply calls.
	Events uint64
	// Reasons counts each reason in its unit (ReasonNone stays 0).
	Reasons [ReasonCount]uint64
	// Sessions, Lineages and Blocks are what the index holds now: sessions,
	// (stream, session) lineages and live lineage blocks.
	Sessions, Lineages, Blocks int
}
