package clusterindex

import (
	"slices"
	"testing"
)

// TestSequenceOrdersEachSender: messages of one sender come out in seq
// order whatever the arrival order, copies and overtaken ones are
// dropped, senders are independent, unnumbered ones pass at once.
func TestSequenceOrdersEachSender(t *testing.T) {
	s := newSequence[string]()
	steps := []struct {
		sender, seq uint64
		msg         string
		want        []string
		stale       bool
	}{
		{1, 5, "a5", []string{"a5"}, false}, // first seen: starts there
		{1, 7, "a7", nil, false},            // gap: held
		{2, 1, "b1", []string{"b1"}, false}, // another sender is not held up
		{1, 6, "a6", []string{"a6", "a7"}, false},
		{1, 6, "a6", nil, true}, // a copy
		{0, 0, "x", []string{"x"}, false},
		{1, 9, "a9", nil, false},
		{1, 10, "a10", nil, false},
	}
	for i, st := range steps {
		got, stale := s.admit(st.sender, st.seq, st.msg)
		if !slices.Equal(got, st.want) || stale != st.stale {
			t.Fatalf("step %d: %v stale %v, want %v stale %v", i, got, stale, st.want, st.stale)
		}
	}
	if !s.gaps() {
		t.Fatal("a8 missing: want a gap")
	}
	if got := s.skip(); !slices.Equal(got, []string{"a9", "a10"}) || s.gaps() {
		t.Fatalf("skip: %v (gaps %v)", got, s.gaps())
	}
	if _, stale := s.admit(1, 8, "a8"); !stale {
		t.Fatal("a8 after the skip: want stale")
	}
}

// TestSequenceHandsOver: the cursors an activation hands over make its
// successor expect each sender's next message, and what the predecessor
// held comes out in order.
func TestSequenceHandsOver(t *testing.T) {
	old := newSequence[string]()
	old.admit(1, 1, "a1")
	old.admit(1, 2, "a2")
	old.admit(1, 4, "a4") // a3 lost on the way, for now
	old.admit(2, 9, "b9")
	if got := old.heldInOrder(); !slices.Equal(got, []string{"a4"}) || old.gaps() {
		t.Fatalf("held %v", got)
	}
	next := newSequence[string]()
	next.load(old.cursors())
	if got, _ := next.admit(1, 4, "a4"); got != nil {
		t.Fatalf("a4 before a3: %v", got)
	}
	if got, _ := next.admit(1, 3, "a3"); !slices.Equal(got, []string{"a3", "a4"}) {
		t.Fatalf("a3: %v", got)
	}
	if _, stale := next.admit(2, 9, "b9"); !stale {
		t.Fatal("b9 applied before the hand-over: want stale")
	}
	if got, _ := next.admit(2, 10, "b10"); !slices.Equal(got, []string{"b10"}) {
		t.Fatalf("b10: %v", got)
	}
}
