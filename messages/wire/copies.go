package wire

// remaining_copy_counts: newer vLLM's BlockRemoved says, per removed hash,
// how many copies of that block the engine still holds (its prefix cache
// may hold the same content twice, e.g. two requests that computed it at
// once). A hash with copies left is still cached, so it must stay in the
// index; 0 is the last copy gone. Absent (older engines, every other
// publisher) means the removal is final, as before.
//
// It is a hint (hint.go): an unusable value — not an array of
// non-negative integers, over the hash cap, or not one count per hash —
// is dropped (invalid_remaining_copy_counts) and the removal is applied
// whole, as an engine without the field would have it.

// remainingCopies reads remaining_copy_counts into the decoder's arena.
func (x *Decoder) remainingCopies(ev *Event) error {
	const field = "remaining_copy_counts"
	n, ok, err := x.arrayOrNil(field)
	if err != nil || !ok {
		return err
	}
	if n > x.lim.MaxHashes {
		if err := x.skipN(n); err != nil {
			return err
		}
		return overLimit("%d %s exceed the cap of %d", n, field, x.lim.MaxHashes)
	}
	start := len(x.copies)
	var bad fieldErrs
	for i := 0; i < n; i++ {
		v, err := x.optInt(field, 0)
		if err == nil && !v.Ok {
			err = malformed("%s: element %d is nil, want a count", field, i)
		}
		if err != nil {
			if err := bad.keep(err); err != nil {
				return err
			}
			continue
		}
		x.copies = append(x.copies, uint32(min(v.V, 1<<32-1)))
	}
	if bad.first != nil {
		x.copies = x.copies[:start]
		return bad.first
	}
	ev.RemainingCopies = x.copies[start:len(x.copies):len(x.copies)]
	if ev.RemainingCopies == nil {
		ev.RemainingCopies = []uint32{}
	}
	return nil
}

// checkCopies drops remaining_copy_counts when it does not give one count
// per removed hash (keys come in any order, so this waits for resolve).
func (st *eventState) checkCopies() {
	ev := st.ev
	if ev.RemainingCopies != nil && len(ev.RemainingCopies) != len(ev.BlockHashes) {
		n := len(ev.RemainingCopies)
		ev.RemainingCopies = nil
		_ = st.drop(HintRemainingCopies, malformed("remaining_copy_counts has %d counts for %d block hashes", n, len(ev.BlockHashes)))
	}
}
