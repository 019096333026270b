package sessions

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/routerevent"
)

// ErrInvalidSessionID: a session id that is empty, longer than
// Config.MaxIDLen bytes, or has a byte outside printable ASCII.
var ErrInvalidSessionID = errors.New("invalid session id")

// Defaults.
const (
	DefaultMaxSessions = 1 << 16
	DefaultMaxDepth    = 1024
	DefaultMaxHolders  = 16
	DefaultMaxBlocks   = 1 << 20
	DefaultIdleTTL     = 30 * time.Minute
	DefaultMaxIDLen    = 256
)

// Config bounds the index. Zero fields keep their defaults.
type Config struct {
	// MaxSessions caps the sessions held (--max-sessions); the least
	// recently stored one is evicted (default 2^16).
	MaxSessions int
	// MaxDepth caps the blocks of one (stream, session) lineage; past it the
	// oldest stored blocks are dropped, down to MaxDepth − MaxDepth/8 so the
	// compaction is amortised (default 1024).
	MaxDepth int
	// MaxHolders caps the (worker, dp_rank) lineages of one session; a new
	// one drops the session's least recently stored lineage (default 16).
	MaxHolders int
	// MaxBlocks caps the live lineage blocks of all sessions; past it whole
	// least recently stored sessions are evicted, never the one being
	// stored to (default 2^20; the bound is therefore MaxBlocks plus one
	// session's MaxHolders × MaxDepth).
	MaxBlocks int
	// IdleTTL: a session with no store for this long is dropped by Expire
	// (default 30 min; negative: never).
	IdleTTL time.Duration
	// MaxIDLen caps a session id in bytes (default 256).
	MaxIDLen int
}

func (c *Config) defaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxDepth <= 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if c.MaxHolders <= 0 {
		c.MaxHolders = DefaultMaxHolders
	}
	if c.MaxBlocks <= 0 {
		c.MaxBlocks = DefaultMaxBlocks
	}
	if c.IdleTTL == 0 {
		c.IdleTTL = DefaultIdleTTL
	}
	if c.MaxIDLen <= 0 {
		c.MaxIDLen = DefaultMaxIDLen
	}
}

// Index is the session lineage index: per (worker, dp_rank) stream and
// session, the chain of engine block hashes that session stored there. It
// is a plain value for one goroutine (an actor's state): no clock, no
// goroutines, no I/O; the same calls always give the same state.
type Index struct {
	cfg      Config
	sessions map[string]*session
	streams  map[messages.WorkerKey]*stream
	// LRU of sessions by last store: head is the most recent.
	head, tail *session
	blocks     int    // live lineage blocks
	lineages   int    // lineages held
	seq        uint64 // store stamp, bumped per lineage append
	stats      Stats

	// scratch for one Removed event: the lineages it pruned, the holders
	// of one hash.
	dirty, hold []*lineage
	remap       []int32 // scratch for compact
}

// session is one session id's lineages, at most one per stream.
type session struct {
	id         string
	prev, next *session
	lastSeen   time.Time
	lins       []*lineage
}

// stream is one (worker, dp_rank): its sessions' lineages and, per engine
// hash, the lineages holding it (engine hashes mean something only within
// their stream).
//
// A hash is nearly always held by one lineage: owner maps it to that one
// and more, rarely used, to the others — one pointer per (hash, stream)
// entry instead of a pointer and a slice header (~40 B less per entry).
type stream struct {
	key   messages.WorkerKey
	lins  map[*lineage]struct{}
	owner map[messages.ExternalHash]*lineage
	more  map[messages.ExternalHash][]*lineage
}

// New returns an empty index.
func New(cfg Config) *Index {
	cfg.defaults()
	return &Index{
		cfg:      cfg,
		sessions: make(map[string]*session),
		streams:  make(map[messages.WorkerKey]*stream),
	}
}

// Config returns the configuration with defaults applied.
func (x *Index) Config() Config { return x.cfg }

// Stats returns the counters and gauges.
func (x *Index) Stats() Stats {
	s := x.stats
	s.Sessions, s.Lineages, s.Blocks = len(x.sessions), x.lineages, x.blocks
	return s
}

// CheckID reports whether id is a session id the index accepts: 1 to
// MaxIDLen bytes of printable ASCII (0x21–0x7E): the check Apply makes
// (CheckID with the index's MaxIDLen).
func (x *Index) CheckID(id string) error { return CheckID(id, x.cfg.MaxIDLen) }

// CheckID reports whether id is a session id of 1 to maxLen bytes (≤ 0:
// DefaultMaxIDLen) of printable ASCII (0x21–0x7E), for callers that hold no
// Index (an HTTP layer checking /route's session_id and /sessions/{id}).
func CheckID(id string, maxLen int) error {
	if maxLen <= 0 {
		maxLen = DefaultMaxIDLen
	}
	if len(id) == 0 || len(id) > maxLen {
		return fmt.Errorf("sessions: id of %d bytes (1..%d): %w", len(id), maxLen, ErrInvalidSessionID)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("sessions: id byte %d is %#x (printable ASCII only): %w", i, c, ErrInvalidSessionID)
		}
	}
	return nil
}

func (x *Index) count(r Reason, n int) { x.stats.Reasons[r] += uint64(n) }

// tierBit maps a storage tier to its bit; tiers past 7 share bit 7.
func tierBit(t messages.StorageTier) uint8 { return 1 << min(uint8(t), 7) }

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
	s := x.sessions[id]
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
	touched, appended := false, false
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
			if pb := &l.blocks[prevPos]; pb.hasAnchor && pb.anchor == h {
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
	s.lastSeen = now
	x.toFront(s)
	if appended {
		x.seq++
		l.stamp, l.updated = x.seq, now
		if l.live > x.cfg.MaxDepth {
			x.trim(l, l.live-(x.cfg.MaxDepth-x.cfg.MaxDepth/8))
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
		s = &session{id: id, lastSeen: now}
		x.sessions[id] = s
		x.toFront(s)
		for len(x.sessions) > x.cfg.MaxSessions {
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
		if x.sessions[id] != s { // it was the session's only lineage
			x.sessions[id] = s
			x.toFront(s)
		}
	}
	st := x.streams[key]
	if st == nil {
		st = &stream{key: key, lins: make(map[*lineage]struct{}), owner: make(map[messages.ExternalHash]*lineage),
			more: make(map[messages.ExternalHash][]*lineage)}
		x.streams[key] = st
	}
	l := &lineage{key: key, sess: s, st: st, idx: make(map[messages.ExternalHash]uint64), dirtyFrom: -1}
	s.lins = append(s.lins, l)
	st.lins[l] = struct{}{}
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
		// A copy of the holders: kill edits the owner maps.
		hold = st.holders(h, hold[:0])
		for _, l := range hold {
			dirty = x.removeFrom(l, h, tier, dirty)
		}
	}
	for _, l := range dirty {
		x.settle(l)
	}
	clear(dirty)
	clear(hold)
	x.dirty, x.hold = dirty[:0], hold[:0]
}

func (x *Index) removeFrom(l *lineage, h messages.ExternalHash, tier uint8, dirty []*lineage) []*lineage {
	pos, ok := l.lookup(h)
	if !ok {
		return dirty
	}
	b := &l.blocks[pos]
	if b.tiers&tier == 0 {
		return dirty
	}
	b.tiers &^= tier
	if b.tiers != 0 {
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
	for l := range st.lins {
		x.count(ReasonCleared, 1)
		x.dropLineage(l, false)
	}
	delete(x.streams, key)
}

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
	s := x.sessions[id]
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
	for x.tail != nil && !now.Before(x.tail.lastSeen.Add(x.cfg.IdleTTL)) {
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
		for i := range l.blocks {
			if b := &l.blocks[i]; !b.dead {
				st.unown(b.hash, l)
			}
		}
	}
	x.blocks -= l.live
	x.lineages--
	delete(st.lins, l)
	if len(st.lins) == 0 && x.streams[st.key] == st {
		delete(x.streams, st.key)
	}
	if i := slices.Index(s.lins, l); i >= 0 {
		s.lins = slices.Delete(s.lins, i, i+1)
	}
	if len(s.lins) == 0 && x.sessions[s.id] == s {
		delete(x.sessions, s.id)
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

// addTier adds the tier to every lineage of the stream holding h and
// reports whether one does.
func (st *stream) addTier(h messages.ExternalHash, tier uint8) bool {
	one, ok := st.owner[h]
	if !ok {
		return false
	}
	one.addTier(h, tier)
	for _, l := range st.more[h] {
		l.addTier(h, tier)
	}
	return true
}

// holders appends the lineages of the stream holding h to buf.
func (st *stream) holders(h messages.ExternalHash, buf []*lineage) []*lineage {
	one, ok := st.owner[h]
	if !ok {
		return buf
	}
	return append(append(buf, one), st.more[h]...)
}

func (st *stream) own(h messages.ExternalHash, l *lineage) {
	if _, ok := st.owner[h]; !ok {
		st.owner[h] = l
		return
	}
	st.more[h] = append(st.more[h], l)
}

func (st *stream) unown(h messages.ExternalHash, l *lineage) {
	one, ok := st.owner[h]
	if !ok {
		return
	}
	more := st.more[h]
	if one != l {
		i := slices.Index(more, l)
		if i < 0 {
			return
		}
		more[i] = more[len(more)-1]
	}
	// The last of more takes l's place (as owner, or in more).
	n := len(more)
	switch {
	case n == 0:
		delete(st.owner, h)
		return
	case one == l:
		st.owner[h] = more[n-1]
	}
	more[n-1] = nil
	if n == 1 {
		delete(st.more, h)
	} else {
		st.more[h] = more[:n-1]
	}
}
