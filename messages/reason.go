package messages

// Reason says why an engine event (or a whole message) was not turned into a
// PlacementEvent. The set is closed: every value is a bounded metrics label and
// a stable string in `kvrouter decode` output. ReasonNone means accepted.
type Reason uint8

// Event-level reasons.
const (
	ReasonNone Reason = iota

	// Decoding.
	ReasonMalformed     // not an event, wrong field type, bad hash value
	ReasonUnknownTag    // a tag kvrouter does not index (BlockInactive, LoadStat, Ignored, …)
	ReasonLimitExceeded // more hashes/tokens/bytes/nesting than the configured caps
	ReasonTruncated     // the batch ended inside this event; later events are lost with it

	// Group filter (actors/normalizer/README.md, "Rules" 3).
	ReasonNonMainAttentionKind  // kv_cache_spec_kind is a known non-main kind
	ReasonUnknownKind           // kv_cache_spec_kind is a string kvrouter does not know
	ReasonNonMainAttentionGroup // group_idx's learned kind is non-main
	ReasonUnlearnedGroupIdx     // group_idx != 0 and no BlockStored taught its kind

	// Placement.
	ReasonRemoteLocality  // locality REMOTE: the blocks are not this worker's
	ReasonUnknownLocality // locality is neither LOCAL nor REMOTE
	ReasonUnknownMedium   // medium names no tier kvrouter knows

	// Conversion to local hashes (actors/normalizer/README.md, "Rules" 5, and
	// "Cache namespaces").
	ReasonAmbiguousCacheNamespace // parent's engine hash was stored under two namespaces
	ReasonSelfReferencingChain    // a block hash repeats in the event or equals its parent
	ReasonBlockSizeMismatch       // engine block_size differs from the configured one
	ReasonNoTokens                // no complete block of tokens to hash (e.g. CPU placeholders)

	ReasonCount // number of reasons, ReasonNone included (sizes per-reason counters)
)

var reasonNames = [ReasonCount]string{
	ReasonNone:                    "",
	ReasonMalformed:               "malformed",
	ReasonUnknownTag:              "unknown_tag",
	ReasonLimitExceeded:           "limit_exceeded",
	ReasonTruncated:               "truncated",
	ReasonNonMainAttentionKind:    "non_main_attention_kind",
	ReasonUnknownKind:             "unknown_kind",
	ReasonNonMainAttentionGroup:   "non_main_attention_group",
	ReasonUnlearnedGroupIdx:       "unlearned_group_idx",
	ReasonRemoteLocality:          "remote_locality",
	ReasonUnknownLocality:         "unknown_locality",
	ReasonUnknownMedium:           "unknown_medium",
	ReasonAmbiguousCacheNamespace: "ambiguous_cache_namespace",
	ReasonSelfReferencingChain:    "self_referencing_chain",
	ReasonBlockSizeMismatch:       "block_size_mismatch",
	ReasonNoTokens:                "no_tokens",
}

// String returns the reason's snake_case label ("" for ReasonNone).
func (r Reason) String() string {
	if r < ReasonCount {
		return reasonNames[r]
	}
	return "invalid"
}

// LosesHistory reports whether rejecting an event for r leaves the index
// short of what the engine did: the event was meant for this worker's index
// and could not be applied (bad input, caps, an unknown tier, a block size
// or hash chain kvrouter cannot use). Such a loss makes the stream's index
// state untrustworthy — a lost BlockRemoved would leave a phantom block — so
// the stream is dropped and flagged degraded. Events rejected by design (a
// tag kvrouter does not index, the group filter, another worker's blocks)
// lose nothing.
func (r Reason) LosesHistory() bool {
	switch r {
	case ReasonNone, ReasonUnknownTag, ReasonNonMainAttentionKind, ReasonUnknownKind,
		ReasonNonMainAttentionGroup, ReasonUnlearnedGroupIdx, ReasonRemoteLocality:
		return false
	}
	return true
}
