package clusterindex

import (
	"maps"
	"slices"
)

// sequence puts each front's messages to a shard back in the order the
// front sent them, once each. A front numbers what it sends to a shard
// (clusterpb.Sequenced: sender, seq from 1). Around a hand-over the same
// front's messages reach the new activation by two paths — directly, once
// the front sees the new topology, and through the old activation, which
// forwards what still reaches it — so a later message may arrive first.
// For each sender:
//
//   - seq == next: delivered, then every held message that follows it;
//   - seq > next: held until the gap fills (the grain waits GapWait, then
//     skips the gap and rebuilds: a message was lost);
//   - seq < next: already applied (a copy, or an old message overtaken
//     and given up on) — dropped and counted stale;
//   - a sender seen for the first time starts at whatever seq it brings
//     (its earlier messages went to an activation whose state this one
//     did not inherit, which then rebuilds anyway).
//
// Seq 0 is "not numbered" (a message from outside a front): delivered at
// once. Plain data; T is what the grain keeps of a message.
type sequence[T any] struct {
	next map[uint64]uint64
	held map[uint64]map[uint64]T
}

func newSequence[T any]() *sequence[T] {
	return &sequence[T]{next: map[uint64]uint64{}, held: map[uint64]map[uint64]T{}}
}

// admit takes message m (sender's number seq) and returns what can be
// delivered now, in order; stale says m was dropped.
func (s *sequence[T]) admit(sender, seq uint64, m T) (ready []T, stale bool) {
	if seq == 0 {
		return []T{m}, false
	}
	n, known := s.next[sender]
	switch {
	case !known || seq == n:
		s.next[sender] = seq + 1
		return s.drain(sender, []T{m}), false
	case seq < n:
		return nil, true
	}
	if s.held[sender] == nil {
		s.held[sender] = map[uint64]T{}
	}
	s.held[sender][seq] = m
	return nil, false
}

// drain appends the held messages that now follow in order.
func (s *sequence[T]) drain(sender uint64, out []T) []T {
	h := s.held[sender]
	for n := s.next[sender]; len(h) > 0; n++ {
		m, ok := h[n]
		if !ok {
			break
		}
		out = append(out, m)
		delete(h, n)
		s.next[sender] = n + 1
	}
	if len(h) == 0 {
		delete(s.held, sender)
	}
	return out
}

// gaps reports whether messages wait for a missing one.
func (s *sequence[T]) gaps() bool { return len(s.held) > 0 }

// skip gives up on every gap: each sender resumes at its lowest held
// message; returns what that delivers (senders in order).
func (s *sequence[T]) skip() []T {
	var out []T
	for _, sender := range slices.Sorted(maps.Keys(s.held)) {
		s.next[sender] = slices.Min(slices.Collect(maps.Keys(s.held[sender])))
		out = s.drain(sender, out)
	}
	return out
}

// heldInOrder removes and returns every held message, by sender then seq
// (what an activation handing over forwards after its state).
func (s *sequence[T]) heldInOrder() []T {
	var out []T
	for _, sender := range slices.Sorted(maps.Keys(s.held)) {
		h := s.held[sender]
		for _, seq := range slices.Sorted(maps.Keys(h)) {
			out = append(out, h[seq])
		}
	}
	clear(s.held)
	return out
}

// cursors returns, per sender, the last seq delivered.
func (s *sequence[T]) cursors() map[uint64]uint64 {
	out := make(map[uint64]uint64, len(s.next))
	for sender, n := range s.next {
		out[sender] = n - 1
	}
	return out
}

// load continues from cursors (a hand-over): each sender's next message
// is the one after its cursor.
func (s *sequence[T]) load(cursors map[uint64]uint64) {
	for sender, c := range cursors {
		s.next[sender] = c + 1
	}
}
