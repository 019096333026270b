package sessions

import (
	"hash/maphash"
	"iter"

	"github.com/kvrouter/kvrouter/actors/internal/hashtab"
)

// sessionTable maps session ids to sessions: a table of 16-byte slots
// (actors/internal/hashtab, 7/16 to 7/8 full) keyed by a 64-bit hash of the
// id under a random seed (hash/maphash: an engine cannot aim its ids at one
// hash), each hit checked against the session's id. An id whose hash
// another held id already has (about one pair in 2^64 / n) goes to a Go map
// beside it. A Go map of string keys keeps the id's header and the pointer
// in a 24-byte slot with a control byte, in tables at most 7/8 full: ~46
// bytes a session at the in-process benchmark's ~1,800 sessions, against
// ~26 on average here (16-byte slots at ~1.65 × their size per key).
type sessionTable struct {
	seed   maphash.Seed
	byHash hashtab.Map[uint64, *session]
	other  map[string]*session // made by the first collision
}

func newSessionTable() sessionTable { return sessionTable{seed: maphash.MakeSeed()} }

func (t *sessionTable) hash(id string) uint64 { return maphash.String(t.seed, id) }

// len returns the number of sessions.
func (t *sessionTable) len() int { return t.byHash.Len() + len(t.other) }

// get returns the session of id (nil: none).
func (t *sessionTable) get(id string) *session { return t.getAt(t.hash(id), id) }

func (t *sessionTable) getAt(h uint64, id string) *session {
	if s, ok := t.byHash.Get(h); ok && s.id == id {
		return s
	}
	return t.other[id]
}

// put adds s, whose id the table does not hold.
func (t *sessionTable) put(s *session) { t.putAt(t.hash(s.id), s) }

func (t *sessionTable) putAt(h uint64, s *session) {
	if cur, ok := t.byHash.Get(h); ok && cur.id != s.id {
		if t.other == nil {
			t.other = make(map[string]*session)
		}
		t.other[s.id] = s
		return
	}
	t.byHash.Put(h, s)
}

// remove drops s, if the table holds it.
func (t *sessionTable) remove(s *session) { t.removeAt(t.hash(s.id), s) }

func (t *sessionTable) removeAt(h uint64, s *session) {
	if cur, ok := t.byHash.Get(h); ok && cur == s {
		t.byHash.Delete(h)
		return
	}
	if t.other[s.id] == s {
		delete(t.other, s.id)
		if len(t.other) == 0 {
			t.other = nil // frees it
		}
	}
}

// all yields every session, in no particular order; the table must not
// change during the iteration.
func (t *sessionTable) all() iter.Seq[*session] {
	return func(yield func(*session) bool) {
		for _, s := range t.byHash.All() {
			if !yield(s) {
				return
			}
		}
		for _, s := range t.other {
			if !yield(s) {
				return
			}
		}
	}
}
