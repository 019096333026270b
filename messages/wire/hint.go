package wire

// Hint names an optional field that informs but does not decide which
// blocks an event describes or in which namespace: a routing hint, or a
// field shown and not acted on. A hint's value that is over a cap or of the
// wrong type is dropped (the field left absent) and recorded in the event's
// Dropped set; the event itself is kept. Only the fields that change which
// blocks, which namespace or which tier (hashes, parent, tokens, block
// size, lora_name, cache salt, extra_keys, medium, group_idx, kind,
// locality) may reject an event (README.md, "Bad input").
type Hint uint8

// Hints that may be dropped.
const (
	HintSessionID       Hint = iota // session_id: flat key, position 14 or SGLang's metadata map
	HintSlidingWindow               // kv_cache_spec_sliding_window
	HintOwnership                   // ownership
	HintLoraID                      // lora_id (deprecated, ignored)
	HintTimestamp                   // the batch's ts (only feeds lag figures)
	HintRemainingCopies             // BlockRemoved's remaining_copy_counts (copies.go)

	HintCount // number of hints (sizes per-hint counters)
)

var hintReasons = [HintCount]string{
	HintSessionID:       "invalid_session_id",
	HintSlidingWindow:   "invalid_sliding_window",
	HintOwnership:       "invalid_ownership",
	HintLoraID:          "invalid_lora_id",
	HintTimestamp:       "invalid_timestamp",
	HintRemainingCopies: "invalid_remaining_copy_counts",
}

// Reason is the hint's bounded counter label ("invalid_session_id", …).
func (h Hint) Reason() string {
	if h < HintCount {
		return hintReasons[h]
	}
	return "invalid"
}

// Hints is a set of dropped hints.
type Hints uint8

// Has reports whether h is in the set.
func (s Hints) Has(h Hint) bool { return s&(1<<h) != 0 }

// With returns the set with h added.
func (s Hints) With(h Hint) Hints { return s | 1<<h }

// hintOf returns the hint a field is, if it is one.
func hintOf(f field) (Hint, bool) {
	switch f {
	case fSessionID:
		return HintSessionID, true
	case fSliding:
		return HintSlidingWindow, true
	case fOwnership:
		return HintOwnership, true
	case fLoraID:
		return HintLoraID, true
	case fCopies:
		return HintRemainingCopies, true
	}
	return 0, false
}

// drop records that the value of hint h was unusable (err, a field error)
// and discards the error: the event is kept without the hint. Structural
// errors are handed back (nothing after them can be read).
func (st *eventState) drop(h Hint, err error) error {
	if err == nil || isStructural(err) {
		return err
	}
	st.ev.Dropped = st.ev.Dropped.With(h)
	if st.ev.DroppedDetail == "" {
		st.ev.DroppedDetail = err.Error()
	}
	return nil
}
