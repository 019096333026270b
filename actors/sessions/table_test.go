package sessions

import (
	"slices"
	"testing"
)

// TestSessionTableCollisions forces ids onto one hash: the second goes to
// the map beside the table, both stay found by their id, an id not held is
// not found, and removing either leaves the other (and a new id on that
// hash) found.
func TestSessionTableCollisions(t *testing.T) {
	tb := newSessionTable()
	const h = 42
	a, b, c := &session{id: "a"}, &session{id: "b"}, &session{id: "c"}
	tb.putAt(h, a)
	tb.putAt(h, b)
	if tb.getAt(h, "a") != a || tb.getAt(h, "b") != b || tb.getAt(h, "c") != nil || tb.len() != 2 || tb.other == nil {
		t.Fatalf("a and b on one hash: got %v %v %v, len %d", tb.getAt(h, "a"), tb.getAt(h, "b"), tb.getAt(h, "c"), tb.len())
	}
	tb.removeAt(h, a)
	if tb.getAt(h, "a") != nil || tb.getAt(h, "b") != b || tb.len() != 1 {
		t.Fatalf("a removed: got %v %v, len %d", tb.getAt(h, "a"), tb.getAt(h, "b"), tb.len())
	}
	tb.putAt(h, c)
	if tb.getAt(h, "c") != c || tb.getAt(h, "b") != b || tb.len() != 2 {
		t.Fatalf("c added: got %v %v, len %d", tb.getAt(h, "c"), tb.getAt(h, "b"), tb.len())
	}
	tb.removeAt(h, b)
	if tb.getAt(h, "b") != nil || tb.getAt(h, "c") != c || tb.len() != 1 || tb.other != nil {
		t.Fatalf("b removed: got %v %v, len %d, overflow %v", tb.getAt(h, "b"), tb.getAt(h, "c"), tb.len(), tb.other)
	}
	if got := slices.Collect(tb.all()); len(got) != 1 || got[0] != c {
		t.Fatalf("all: %v", got)
	}
	tb.removeAt(h, b) // not held: nothing changes
	if tb.len() != 1 {
		t.Fatalf("removing a session not held: len %d", tb.len())
	}
}
