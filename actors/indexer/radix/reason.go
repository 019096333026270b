package radix

import "math/bits"

// Reason is one thing that can happen while applying an event. The set is
// closed: every value is a bounded metrics label. Stats counts each reason
// in the unit its comment names.
type Reason uint8

// Reasons.
const (
	ReasonStale       Reason = iota // events: id ≤ the stream's last applied id; ignored
	ReasonIDGap                     // events: id > last+1; applied, history between is missing
	ReasonUnsequenced               // events: id 0 (a dump, a test); applied, id position kept
	ReasonInvalid                   // events: unknown kind or tier; id consumed, content ignored

	ReasonParentNotFound // events: stored chain whose parent the stream does not hold; kept detached
	ReasonDetachedParent // events: stored chain continuing a detached block; kept detached
	ReasonGrafted        // blocks: detached blocks attached because their parent was stored
	ReasonDuplicateStore // blocks: stored blocks the stream already held (tier added, place kept)
	ReasonAliasedBlock   // blocks: a new engine hash for a tree block the stream holds under another

	ReasonUnknownRemoved // hashes: removed hashes the stream does not hold
	ReasonTierNotHeld    // hashes: removed hashes held, but not on the event's tier
	ReasonCascaded       // blocks: dropped because a block of their prefix was removed

	ReasonPlaceholderResolved   // hashes: token-less tier stores resolved through the stream's engine hashes
	ReasonPlaceholderUnresolved // hashes: token-less tier stores of blocks the stream does not hold

	ReasonCount // number of reasons
)

var reasonNames = [ReasonCount]string{
	ReasonStale:                 "stale",
	ReasonIDGap:                 "id_gap",
	ReasonUnsequenced:           "unsequenced",
	ReasonInvalid:               "invalid",
	ReasonParentNotFound:        "parent_not_found",
	ReasonDetachedParent:        "detached_parent",
	ReasonGrafted:               "grafted",
	ReasonDuplicateStore:        "duplicate_store",
	ReasonAliasedBlock:          "aliased_block",
	ReasonUnknownRemoved:        "unknown_removed",
	ReasonTierNotHeld:           "tier_not_held",
	ReasonCascaded:              "cascaded",
	ReasonPlaceholderResolved:   "placeholder_resolved",
	ReasonPlaceholderUnresolved: "placeholder_unresolved",
}

// String returns the reason's snake_case label.
func (r Reason) String() string {
	if r < ReasonCount {
		return reasonNames[r]
	}
	return "invalid_reason"
}

// Outcome says what Apply did with one event: whether its content was
// applied (false for stale and invalid events) and which reasons occurred.
type Outcome struct {
	Applied bool
	Reasons ReasonSet
}

// Has reports whether r occurred.
func (o Outcome) Has(r Reason) bool { return o.Reasons.Has(r) }

// ReasonSet is a set of Reasons.
type ReasonSet uint32

// Has reports whether r is in the set.
func (s ReasonSet) Has(r Reason) bool { return s&(1<<r) != 0 }

// List returns the reasons in the set, in declaration order.
func (s ReasonSet) List() []Reason {
	out := make([]Reason, 0, bits.OnesCount32(uint32(s)))
	for r := Reason(0); r < ReasonCount; r++ {
		if s.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// Stats counts what a Tree has seen since it was created.
type Stats struct {
	Events uint64              // events given to Apply
	Counts [ReasonCount]uint64 // per reason, in the unit of its comment
}

// note counts n occurrences of r and records r in o.
func (t *Tree) note(o *Outcome, r Reason, n int) {
	if n <= 0 {
		return
	}
	t.stats.Counts[r] += uint64(n)
	if o != nil {
		o.Reasons |= 1 << r
	}
}
