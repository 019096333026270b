package sessions

import (
	"errors"
	"fmt"
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

// The caps of Config's bounds: a stream's lineage ids and a lineage's
// positions fit 20 bits of an owner slot (owners.go). New lowers a bound
// above its cap to it; Config.Check reports one.
const (
	MaxSessionsCap = maxLineageIDs // 2^20
	MaxDepthCap    = maxSpan / 2   // 2^18
)

// Config bounds the index. Zero fields keep their defaults.
type Config struct {
	// MaxSessions caps the sessions held (--max-sessions); the least
	// recently stored one is evicted (default 2^16, at most
	// MaxSessionsCap).
	MaxSessions int
	// MaxDepth caps the blocks of one (stream, session) lineage; past it the
	// oldest stored blocks are dropped, down to MaxDepth − MaxDepth/8 so the
	// compaction is amortised (default 1024, at most MaxDepthCap).
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

// Check reports a bound above its cap, which New lowers to the cap (the
// session actor logs it when it starts; kvrouter serve refuses such a
// --max-sessions).
func (c Config) Check() error {
	if c.MaxSessions > MaxSessionsCap {
		return fmt.Errorf("sessions: MaxSessions %d is above its cap %d (lineage ids fit 20 bits); %d is used", c.MaxSessions, MaxSessionsCap, MaxSessionsCap)
	}
	if c.MaxDepth > MaxDepthCap {
		return fmt.Errorf("sessions: MaxDepth %d is above its cap %d (lineage positions fit 20 bits); %d is used", c.MaxDepth, MaxDepthCap, MaxDepthCap)
	}
	return nil
}

func (c *Config) defaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	c.MaxSessions = min(c.MaxSessions, MaxSessionsCap)
	if c.MaxDepth <= 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	c.MaxDepth = min(c.MaxDepth, MaxDepthCap)
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
	sessions sessionTable
	streams  map[messages.WorkerKey]*stream
	// LRU of sessions by last store: head is the most recent.
	head, tail *session
	blocks     int    // live lineage blocks
	lineages   int    // lineages held
	seq        uint64 // store stamp, bumped per lineage append
	stats      Stats
	// epoch is the now of the first store: records keep their times as
	// offsets from it (clock), 8 bytes instead of a time.Time's 24.
	epoch   time.Time
	started bool

	// scratch for one Removed event: the lineages it pruned, the holders
	// of one hash.
	dirty []*lineage
	hold  []holding
	remap []int32 // scratch for compact
	// maxSpan bounds a lineage's block list within one event (the
	// constant; a test lowers it).
	maxSpan int
}

// session is one session id's lineages, at most one per stream.
type session struct {
	id         string
	prev, next *session
	lastSeen   int64 // now at the last store (Index.clock)
	lins       []*lineage
}

// clock returns now as the records keep it: its offset from the epoch (set
// by the first call). Offsets take the monotonic clock when both times
// carry it, as time.Time's Sub does.
func (x *Index) clock(now time.Time) int64 {
	if !x.started {
		x.epoch, x.started = now, true
	}
	return int64(now.Sub(x.epoch))
}

// at returns the time a record's offset names.
func (x *Index) at(t int64) time.Time { return x.epoch.Add(time.Duration(t)) }

// stream is one (worker, dp_rank): its sessions' lineages and, per engine
// hash, the lineages holding it and where (engine hashes mean something
// only within their stream): owners.go.
type stream struct {
	key    messages.WorkerKey
	lins   []*lineage // by lineage id; nil: a free id
	free   []uint32   // free lineage ids
	n      int        // lineages held
	owners owners
}

// New returns an empty index.
func New(cfg Config) *Index {
	cfg.defaults()
	return &Index{
		cfg:      cfg,
		maxSpan:  maxSpan,
		sessions: newSessionTable(),
		streams:  make(map[messages.WorkerKey]*stream),
	}
}

// Config returns the configuration with defaults applied.
func (x *Index) Config() Config { return x.cfg }

// Stats returns the counters and gauges.
func (x *Index) Stats() Stats {
	s := x.stats
	s.Sessions, s.Lineages, s.Blocks = x.sessions.len(), x.lineages, x.blocks
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
	held := false
	st.each(h, func(l *lineage, idx int32) bool {
		l.setTier(idx, l.tier(idx)|tier)
		held = true
		return true
	})
	return held
}

// holders appends the lineages of the stream holding h, and where, to
// buf.
func (st *stream) holders(h messages.ExternalHash, buf []holding) []holding {
	st.each(h, func(l *lineage, idx int32) bool {
		buf = append(buf, holding{l, idx})
		return true
	})
	return buf
}

// holding is a lineage holding a hash, and where.
type holding struct {
	l   *lineage
	idx int32
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
