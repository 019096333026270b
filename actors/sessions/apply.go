package sessions

// Applying RouterEvents to the session index: stores extend or start a
// lineage, removes shorten the lineages holding the hash, a clear empties
// the stream.

import (
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/routerevent"
)

// Apply applies one RouterEvent, in its stream's order, at time now (the
// caller's clock; it also runs Expire). Feed it the events the physical
// index applies: it does not check event ids. It returns the event's most
// significant reason (ReasonNone when there is nothing to report).
func (x *Index) Apply(ev messages.RouterEvent, now time.Time) Reason {
	x.stats.Events++
	x.Expire(now)
	key := messages.WorkerKey{Worker: ev.WorkerID, DpRank: ev.Event.DpRank}
	tier := tierBit(ev.StorageTier)
	switch ev.Event.Kind {
	case messages.KindStored:
		return x.store(key, tier, ev, now)
	case messages.KindRemoved:
		x.remove(key, tier, ev.Event.Removed)
	case messages.KindCleared:
		x.clearStream(key)
	case messages.KindOffloaded:
		if st := x.streams[key]; st != nil {
			for _, h := range ev.Event.Offloaded {
				st.addTier(h, tier)
			}
		}
	}
	return ReasonNone
}

// store applies a Stored event: physical tier bits for every lineage that
// already holds a block, then — for a valid session id — the chain.
func (x *Index) store(key messages.WorkerKey, tier uint8, ev messages.RouterEvent, now time.Time) Reason {
	st := x.streams[key]
	id := ev.SessionID
	r := ReasonNone
	switch {
	case id == "" || id == routerevent.UnattributedSessionID:
		r = ReasonUnattributed
	case x.CheckID(id) != nil:
		r = ReasonInvalidSessionID
	default:
		return x.storeChain(st, key, tier, ev, now)
	}
	x.count(r, 1)
	if st != nil {
		for _, b := range ev.Event.Blocks {
			st.addTier(b.BlockHash, tier)
		}
	}
	return r
}

// storeChain applies a Stored event of a valid session. One owners lookup
// per block serves both the tier bits and the question whether the
// session's lineage may hold it.
func (x *Index) storeChain(st *stream, key messages.WorkerKey, tier uint8, ev messages.RouterEvent, now time.Time) Reason {
	id := ev.SessionID
	s := x.sessions.get(id)
	var l *lineage
	if s != nil {
		l = s.find(key)
	}

	// prev/hasPrev: the engine hash the next block must continue;
	// prevPos: its position in l (-1: not in l).
	prev, hasPrev, prevPos := ev.Event.ParentHash, ev.Event.HasParent, int32(-1)
	out := ReasonNone
	if hasPrev {
		if p, ok := l.lookup(prev); ok {
			prevPos = p
		} else if len(ev.Event.Blocks) > 0 {
			out = ReasonUnknownParent
			x.count(out, 1)
		}
	}
	touched, appended, spanned := false, false, false
	blocks := ev.Event.Blocks
	for k, b := range blocks {
		h := b.BlockHash
		// held: l holds h (only possible when some lineage of st does).
		pos, held := int32(-1), false
		if st != nil {
			if st.addTier(h, tier) {
				pos, held = l.lookup(h)
			}
		}
		if hasPrev && h == prev {
			out = ReasonCycle
		} else if held {
			ph, phas := l.parentHash(pos)
			if phas == hasPrev && (!phas || ph == prev) {
				touched = true // duplicate store: tier already added
				prev, hasPrev, prevPos = h, true, pos
				continue
			}
			if prevPos >= 0 && l.isAncestor(pos, prevPos) {
				out = ReasonCycle
			} else {
				out = ReasonConflictingParent
			}
		} else if prevPos >= 0 {
			if seg := l.segment(prevPos); seg.hasAnchor() && seg.anchor == h {
				out = ReasonCycle // h would be its own segment's parent
			}
		}
		if out == ReasonCycle || out == ReasonConflictingParent {
			if st != nil { // the rest of the chain is still stored
				for _, b := range blocks[k+1:] {
					st.addTier(b.BlockHash, tier)
				}
			}
			break
		}
		if l == nil {
			s, l = x.newLineage(s, id, key, now)
			st = l.st
		}
		if len(l.hashes) >= x.maxSpan {
			// Only an event of ~2^19 blocks gets here: trimmed now (to
			// keep positions within their bits) and again at its end, so
			// it ends as a trim at the end leaves it; blocks trimmed here
			// no longer count as held for the rest of the event.
			x.trim(l, int(l.live)-(x.cfg.MaxDepth-x.cfg.MaxDepth/8))
			spanned = true
			if prevPos >= 0 { // moved, or dropped: then a segment under prev
				var ok bool
				if prevPos, ok = l.lookup(prev); !ok {
					prevPos = -1
				}
			}
		}
		l.grow(len(blocks) - k)
		prevPos = x.appendBlock(l, h, tier, prevPos, prev, hasPrev)
		prev, hasPrev = h, true
		touched, appended = true, true
	}
	if out == ReasonConflictingParent || out == ReasonCycle {
		x.count(out, 1)
	}
	if !touched {
		return out
	}
	s.lastSeen = x.clock(now)
	x.toFront(s)
	if appended {
		x.seq++
		l.stamp, l.updated = x.seq, s.lastSeen
		if int(l.live) > x.cfg.MaxDepth || spanned {
			x.trim(l, int(l.live)-(x.cfg.MaxDepth-x.cfg.MaxDepth/8))
		}
	}
	for x.blocks > x.cfg.MaxBlocks && x.tail != s {
		x.count(ReasonEvicted, 1)
		x.dropSession(x.tail)
	}
	return out
}

// newLineage returns s (created when nil, evicting for MaxSessions) with a
// new empty lineage for key (dropping the session's oldest lineage for
// MaxHolders).
func (x *Index) newLineage(s *session, id string, key messages.WorkerKey, now time.Time) (*session, *lineage) {
	if s == nil {
		s = &session{id: id, lastSeen: x.clock(now)}
		x.sessions.put(s)
		x.toFront(s)
		for x.sessions.len() > x.cfg.MaxSessions {
			x.count(ReasonEvicted, 1)
			x.dropSession(x.tail)
		}
	} else {
		x.toFront(s) // never the LRU victim below
	}
	if len(s.lins) >= x.cfg.MaxHolders {
		old := s.lins[0]
		for _, l := range s.lins[1:] {
			if l.stamp < old.stamp {
				old = l
			}
		}
		x.count(ReasonHolderDropped, 1)
		x.dropLineage(old, true)
		if x.sessions.get(id) != s { // it was the session's only lineage
			x.sessions.put(s)
			x.toFront(s)
		}
	}
	st := x.streams[key]
	if st == nil {
		st = &stream{key: key}
		x.streams[key] = st
	}
	l := &lineage{sess: s, st: st, dirtyFrom: -1}
	s.lins = append(s.lins, l)
	st.addLineage(l)
	x.lineages++
	return s, l
}

// remove applies a Removed event: the tier bit goes from every lineage of
// the stream holding each hash; a block left on no tier is dropped with
// every block of the lineage below it.
func (x *Index) remove(key messages.WorkerKey, tier uint8, hashes []messages.ExternalHash) {
	st := x.streams[key]
	if st == nil {
		return
	}
	dirty, hold := x.dirty[:0], x.hold[:0]
	for _, h := range hashes {
		// A copy of the holders: kill edits the owner slots.
		hold = st.holders(h, hold[:0])
		for _, o := range hold {
			dirty = x.removeFrom(o.l, o.idx, tier, dirty)
		}
	}
	for _, l := range dirty {
		x.settle(l)
	}
	clear(dirty)
	clear(hold)
	x.dirty, x.hold = dirty[:0], hold[:0]
}

func (x *Index) removeFrom(l *lineage, pos int32, tier uint8, dirty []*lineage) []*lineage {
	t := l.tier(pos)
	if t&tier == 0 {
		return dirty
	}
	if t &^= tier; t != 0 {
		l.setTier(pos, t)
		return dirty
	}
	if l.dirtyFrom < 0 {
		dirty = append(dirty, l)
		l.dirtyFrom = pos
	}
	l.dirtyFrom = min(l.dirtyFrom, pos)
	x.kill(l, pos)
	x.count(ReasonPruned, 1)
	return dirty
}

// clearStream drops every lineage of one (worker, dp_rank).
func (x *Index) clearStream(key messages.WorkerKey) {
	st := x.streams[key]
	if st == nil {
		return
	}
	for _, l := range st.lins {
		if l != nil {
			x.count(ReasonCleared, 1)
			x.dropLineage(l, false)
		}
	}
	delete(x.streams, key)
}
