package sessions

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/messages"
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
// hash, the lineages holding it and where (engine hashes mean something
// only within their stream).
//
// A hash is nearly always held by one lineage: owner maps it to that one
// and more, rarely used, to the others. Each holder is a ref — the
// lineage's id in lins and the block's position in it — so this one map is
// both the stream's owner table and every lineage's hash → position index,
// and it holds no pointer (the garbage collector does not scan it).
type stream struct {
	key   messages.WorkerKey
	lins  []*lineage // by lineage id; nil: a free id
	free  []uint32   // free lineage ids
	n     int        // lineages held
	owner map[messages.ExternalHash]ref
	more  map[messages.ExternalHash][]ref
}

// ref is a lineage id (high 32 bits) and a block's absolute position in
// it (lineage.base + position, modulo 2^32: a lineage is shorter than that,
// so the difference to base is exact).
type ref uint64

func (r ref) lin() uint32 { return uint32(r >> 32) }

// refOf returns the ref of position pos of l.
func refOf(l *lineage, pos int32) ref { return ref(l.id)<<32 | ref(uint32(l.base)+uint32(pos)) }

// at returns the lineage and position r names.
func (st *stream) at(r ref) (*lineage, int32) {
	l := st.lins[r.lin()]
	return l, int32(uint32(r) - uint32(l.base))
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

// addTier adds the tier to every lineage of the stream holding h and
// reports whether one does.
func (st *stream) addTier(h messages.ExternalHash, tier uint8) bool {
	one, ok := st.owner[h]
	if !ok {
		return false
	}
	st.setTier(one, tier)
	if len(st.more) > 0 {
		for _, r := range st.more[h] {
			st.setTier(r, tier)
		}
	}
	return true
}

func (st *stream) setTier(r ref, tier uint8) {
	l, pos := st.at(r)
	l.blocks[pos].tiers |= tier
}

// holders appends the lineages of the stream holding h to buf.
func (st *stream) holders(h messages.ExternalHash, buf []*lineage) []*lineage {
	one, ok := st.owner[h]
	if !ok {
		return buf
	}
	buf = append(buf, st.lins[one.lin()])
	for _, r := range st.more[h] {
		buf = append(buf, st.lins[r.lin()])
	}
	return buf
}

// find returns the position of h in lineage id (ok false: not held there).
func (st *stream) find(h messages.ExternalHash, id uint32) (int32, bool) {
	one, ok := st.owner[h]
	if !ok {
		return -1, false
	}
	if one.lin() == id {
		_, pos := st.at(one)
		return pos, true
	}
	if len(st.more) > 0 {
		for _, r := range st.more[h] {
			if r.lin() == id {
				_, pos := st.at(r)
				return pos, true
			}
		}
	}
	return -1, false
}

// own records that l holds h at pos.
func (st *stream) own(h messages.ExternalHash, l *lineage, pos int32) {
	r := refOf(l, pos)
	if _, ok := st.owner[h]; !ok {
		st.owner[h] = r
		return
	}
	st.more[h] = append(st.more[h], r)
}

// reown records that l's block h moved to pos (compaction).
func (st *stream) reown(h messages.ExternalHash, l *lineage, pos int32) {
	r := refOf(l, pos)
	if one := st.owner[h]; one.lin() == l.id {
		st.owner[h] = r
		return
	}
	more := st.more[h]
	for i := range more {
		if more[i].lin() == l.id {
			more[i] = r
			return
		}
	}
}

// unown forgets that l holds h.
func (st *stream) unown(h messages.ExternalHash, l *lineage) {
	one, ok := st.owner[h]
	if !ok {
		return
	}
	more := st.more[h]
	if one.lin() != l.id {
		i := slices.IndexFunc(more, func(r ref) bool { return r.lin() == l.id })
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
	case one.lin() == l.id:
		st.owner[h] = more[n-1]
	}
	if n == 1 {
		delete(st.more, h)
	} else {
		st.more[h] = more[:n-1]
	}
}

// addLineage gives l an id in the stream.
func (st *stream) addLineage(l *lineage) {
	if n := len(st.free); n > 0 {
		l.id = st.free[n-1]
		st.free = st.free[:n-1]
		st.lins[l.id] = l
	} else {
		l.id = uint32(len(st.lins))
		st.lins = append(st.lins, l)
	}
	st.n++
}

// dropLineage frees l's id.
func (st *stream) dropLineage(l *lineage) {
	st.lins[l.id] = nil
	st.free = append(st.free, l.id)
	st.n--
}
