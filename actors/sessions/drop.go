package sessions

// Dropping from the session index: an unregistered worker, a forgotten
// session, idle sessions expiring, and the recency list that orders them.

import (
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// DropWorker drops every lineage of every dp rank of worker (an
// unregistered worker).
func (x *Index) DropWorker(worker messages.WorkerID) {
	for key := range x.streams {
		if key.Worker == worker {
			x.clearStream(key)
		}
	}
}

// Forget drops a session's lineage everywhere (DELETE /sessions/{id}). It
// reports whether the session was held.
func (x *Index) Forget(id string) bool {
	s := x.sessions.get(id)
	if s == nil {
		return false
	}
	x.dropSession(s)
	return true
}

// Expire drops the sessions with no store for IdleTTL (at now) and returns
// how many. Sessions expire in the order they were last stored to; a clock
// that goes backwards only delays expiry.
func (x *Index) Expire(now time.Time) int {
	if x.cfg.IdleTTL < 0 {
		return 0
	}
	n := 0
	for x.tail != nil && !now.Before(x.at(x.tail.lastSeen).Add(x.cfg.IdleTTL)) {
		x.dropSession(x.tail)
		n++
	}
	x.count(ReasonExpired, n)
	return n
}

// dropSession drops s and all its lineages.
func (x *Index) dropSession(s *session) {
	for len(s.lins) > 0 {
		x.dropLineage(s.lins[len(s.lins)-1], true)
	}
	// dropLineage removed s once its last lineage went.
}

// dropLineage drops l: its blocks, its place in its session (the session
// goes with its last lineage) and in its stream. unown: also remove its
// blocks from the stream's owners (false when the whole stream goes).
func (x *Index) dropLineage(l *lineage, unown bool) {
	st, s := l.st, l.sess
	if unown {
		for i, h := range l.hashes {
			if l.tier(int32(i)) != 0 {
				st.unown(h, l, int32(i))
			}
		}
	}
	x.blocks -= int(l.live)
	x.lineages--
	st.dropLineage(l)
	if st.n == 0 && x.streams[st.key] == st {
		delete(x.streams, st.key)
	}
	if i := slices.Index(s.lins, l); i >= 0 {
		s.lins = slices.Delete(s.lins, i, i+1)
	}
	if len(s.lins) == 0 && x.sessions.get(s.id) == s {
		x.sessions.remove(s)
		x.unlink(s)
	}
	*l = lineage{dirtyFrom: -1}
}

// toFront makes s the most recently stored session.
func (x *Index) toFront(s *session) {
	if x.head == s {
		return
	}
	x.unlink(s)
	s.next = x.head
	if x.head != nil {
		x.head.prev = s
	}
	x.head = s
	if x.tail == nil {
		x.tail = s
	}
}

func (x *Index) unlink(s *session) {
	if s.prev != nil {
		s.prev.next = s.next
	} else if x.head == s {
		x.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else if x.tail == s {
		x.tail = s.prev
	}
	s.prev, s.next = nil, nil
}
