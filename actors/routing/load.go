package routing

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// Load bookkeeping errors. Methods wrap them with the request id; test with
// errors.Is.
var (
	// ErrInvalidRequestID: the id is empty or longer than MaxIDLen bytes.
	ErrInvalidRequestID = errors.New("invalid request id")
	// ErrDuplicateRequest: a request with this id is already tracked.
	ErrDuplicateRequest = errors.New("duplicate request id")
	// ErrUnknownRequest: no request with this id is tracked (never routed,
	// already freed, expired or evicted).
	ErrUnknownRequest = errors.New("unknown request id")
	// ErrFull: MaxRequests are tracked and RefuseWhenFull is set.
	ErrFull = errors.New("too many tracked requests")
	// ErrInvalidLoad: prefill tokens or blocks negative or above MaxISL.
	ErrInvalidLoad = errors.New("invalid load")
)

// Load defaults.
const (
	DefaultPrefillTTL  = 5 * time.Minute
	DefaultDecodeTTL   = time.Hour
	DefaultMaxRequests = 1 << 18
	DefaultMaxIDLen    = 256
)

// LoadConfig bounds the bookkeeping. Zero fields keep their defaults.
type LoadConfig struct {
	// PrefillTTL: a request still in prefill (no PrefillDone, no Free) this
	// long after it was added is dropped by Expire and counted
	// (default 5 min; negative: never).
	PrefillTTL time.Duration
	// DecodeTTL: a request in decode (PrefillDone seen, no Free) this long
	// after its PrefillDone is dropped by Expire and counted (default 1 h;
	// negative: never). It bounds the leak of a lost free.
	DecodeTTL time.Duration
	// MaxRequests caps the tracked requests (default 2^18).
	MaxRequests int
	// MaxIDLen caps a request id in bytes (default 256).
	MaxIDLen int
	// RefuseWhenFull makes Add fail with ErrFull at MaxRequests. By default
	// the oldest tracked request (earliest Add) is evicted instead and
	// counted: recent requests are the ones that still hold load.
	RefuseWhenFull bool
}

func (c *LoadConfig) defaults() {
	if c.PrefillTTL == 0 {
		c.PrefillTTL = DefaultPrefillTTL
	}
	if c.DecodeTTL == 0 {
		c.DecodeTTL = DefaultDecodeTTL
	}
	if c.MaxRequests <= 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	if c.MaxIDLen <= 0 {
		c.MaxIDLen = DefaultMaxIDLen
	}
}

// RankLoad is the load of one (worker, dp_rank): the sums over the requests
// routed to it and still tracked.
type RankLoad struct {
	Key messages.WorkerKey
	// PrefillTokens is the cost's active_prefill_tokens (doc.go, Cost): the
	// prefill tokens (isl − cached tokens) of requests not yet PrefillDone.
	PrefillTokens int64
	// Blocks is the cost's decode_blocks (doc.go, Cost): the blocks of every
	// tracked request on the rank, in prefill or in decode. A request holds
	// its KV blocks from the moment it is routed (as in the reference's
	// active sequences), so its blocks are counted from Add; PrefillDone only drops its prefill
	// tokens, and Free drops both.
	Blocks int64
	// PrefillRequests and DecodeRequests count the requests in each phase.
	PrefillRequests int
	DecodeRequests  int
}

// LoadStats counts what the bookkeeping saw. All counters only grow.
type LoadStats struct {
	Added          uint64 // requests tracked
	PrefillDone    uint64 // requests moved to decode
	RepeatPrefill  uint64 // PrefillDone of a request already in decode (no-op)
	Freed          uint64 // requests removed by Free
	ExpiredPrefill uint64 // dropped by Expire while in prefill
	ExpiredDecode  uint64 // dropped by Expire while in decode
	Evicted        uint64 // dropped to make room at MaxRequests
	Refused        uint64 // Add failed with ErrFull
	Dropped        uint64 // dropped by DropWorker
	Duplicate      uint64 // Add with an id already tracked
	Unknown        uint64 // PrefillDone, Free, Move or AddOutputBlock of an id not tracked
	Moved          uint64 // requests booked against another rank by Move
	OutputBlocks   uint64 // output blocks added by AddOutputBlock
	InvalidID      uint64 // empty or over-long ids
}

// Load tracks the requests routed to each (worker, dp_rank) and sums their
// load for the cost function. It is a plain value: not safe for concurrent
// use, no clock of its own — every method that needs the time takes it.
//
// Time is kept as a monotone clock: the latest now ever passed. A now earlier
// than that counts as the latest (a clock step back never expires early or
// reorders deadlines), and durations use time.Time.Sub, so monotonic clock
// readings are honoured.
type Load struct {
	cfg     LoadConfig
	ids     map[string]int32
	entries []entry
	free    []int32
	age     list
	prefill list // deadline order (TTLs are fixed, the clock monotone)
	decode  list
	rankIdx map[messages.WorkerKey]int32
	slots   []rankSlot
	freeRk  []int32
	idle    int    // live slots with no request
	slotGen uint64 // bumped whenever a key gains a slot
	epoch   time.Time
	started bool
	clock   int64
	stats   LoadStats
}

// NewLoad returns empty bookkeeping.
func NewLoad(cfg LoadConfig) *Load {
	cfg.defaults()
	return &Load{
		cfg:     cfg,
		ids:     map[string]int32{},
		age:     list{nilSlot, nilSlot},
		prefill: list{nilSlot, nilSlot},
		decode:  list{nilSlot, nilSlot},
		rankIdx: map[messages.WorkerKey]int32{},
	}
}

// Config returns the configuration with defaults applied.
func (l *Load) Config() LoadConfig { return l.cfg }

// Stats returns the counters.
func (l *Load) Stats() LoadStats { return l.stats }

// Len returns the number of tracked requests.
func (l *Load) Len() int { return len(l.ids) }

// Of returns the load of one (worker, dp_rank); zero when nothing is routed
// to it.
func (l *Load) Of(key messages.WorkerKey) RankLoad {
	if i, ok := l.rankIdx[key]; ok {
		return l.slots[i].RankLoad
	}
	return RankLoad{Key: key}
}

// AppendRanks appends the load of every (worker, dp_rank) with a tracked
// request to dst, in no particular order.
func (l *Load) AppendRanks(dst []RankLoad) []RankLoad {
	for i := range l.slots {
		if s := &l.slots[i]; s.live && s.PrefillRequests+s.DecodeRequests > 0 {
			dst = append(dst, s.RankLoad)
		}
	}
	return dst
}

// Phase reports where a tracked request is: its rank and whether it is
// still in prefill. ok is false for an id not tracked.
func (l *Load) Phase(id string) (key messages.WorkerKey, inPrefill, ok bool) {
	i, ok := l.ids[id]
	if !ok {
		return messages.WorkerKey{}, false, false
	}
	e := &l.entries[i]
	return l.slots[e.slot].Key, e.phase == phasePrefill, true
}

// Held returns the load a tracked request holds on its rank: its prefill
// tokens while in prefill, its blocks, and itself as one request of its
// phase (ok false for an id not tracked).
func (l *Load) Held(id string) (RankLoad, bool) {
	i, ok := l.ids[id]
	if !ok {
		return RankLoad{}, false
	}
	e := &l.entries[i]
	h := RankLoad{Key: l.slots[e.slot].Key, Blocks: e.blocks, DecodeRequests: 1}
	if e.phase == phasePrefill {
		h.PrefillTokens, h.PrefillRequests, h.DecodeRequests = e.prefillTokens, 1, 0
	}
	return h, true
}

// tick advances the monotone clock to now and returns it.
func (l *Load) tick(now time.Time) int64 {
	if !l.started {
		l.epoch, l.started = now, true
		return l.clock
	}
	if t := int64(now.Sub(l.epoch)); t > l.clock {
		l.clock = t
	}
	return l.clock
}

func (l *Load) deadline(t int64, ttl time.Duration) int64 {
	if ttl < 0 || t > math.MaxInt64-int64(ttl) {
		return math.MaxInt64
	}
	return t + int64(ttl)
}

// CheckID returns an error if id could not be added now (invalid or already
// tracked) without counting anything; Router.Route uses it before deciding.
func (l *Load) CheckID(id string) error {
	if id == "" || len(id) > l.cfg.MaxIDLen {
		return fmt.Errorf("routing: request id of %d bytes (1..%d): %w", len(id), l.cfg.MaxIDLen, ErrInvalidRequestID)
	}
	if _, dup := l.ids[id]; dup {
		return fmt.Errorf("routing: add request %q: %w", id, ErrDuplicateRequest)
	}
	return nil
}

// Add tracks a request routed to key, in prefill: prefillTokens (isl −
// cached tokens, Decision.PrefillTokens) join the rank's active prefill
// tokens and blocks (Decision.RequestBlocks) its active blocks. Due requests
// are expired first, so an expired id can be reused and a full table makes
// room from stale entries before evicting or refusing.
func (l *Load) Add(id string, key messages.WorkerKey, prefillTokens, blocks int64, now time.Time) error {
	if prefillTokens < 0 || blocks < 0 || prefillTokens > MaxISL || blocks > MaxISL {
		return fmt.Errorf("routing: add request %q: prefill tokens %d, blocks %d: %w", id, prefillTokens, blocks, ErrInvalidLoad)
	}
	t := l.tick(now)
	l.expire(t)
	if err := l.CheckID(id); err != nil {
		if errors.Is(err, ErrDuplicateRequest) {
			l.stats.Duplicate++
		} else {
			l.stats.InvalidID++
		}
		return err
	}
	if len(l.ids) >= l.cfg.MaxRequests {
		if l.cfg.RefuseWhenFull {
			l.stats.Refused++
			return fmt.Errorf("routing: add request %q: %d tracked: %w", id, len(l.ids), ErrFull)
		}
		l.remove(l.age.head)
		l.stats.Evicted++
	}
	slot := l.rankSlot(key)
	i := l.alloc()
	e := &l.entries[i]
	*e = entry{
		id: id, slot: slot, prefillTokens: prefillTokens, blocks: blocks, held: blocks,
		deadline: l.deadline(t, l.cfg.PrefillTTL), phase: phasePrefill,
		agePrev: nilSlot, ageNext: nilSlot, ttlPrev: nilSlot, ttlNext: nilSlot,
	}
	l.ids[id] = i
	l.pushAge(i)
	l.pushTTL(&l.prefill, i)
	r := &l.slots[slot]
	if r.PrefillRequests+r.DecodeRequests == 0 {
		l.idle--
	}
	r.PrefillTokens += prefillTokens
	r.Blocks += blocks
	r.PrefillRequests++
	l.stats.Added++
	return nil
}

// PrefillDone moves a request from prefill to decode: its prefill tokens
// leave the rank's load, its blocks stay, and its deadline becomes now +
// DecodeTTL. A request already in decode is left alone (idempotent, counted
// as RepeatPrefill).
func (l *Load) PrefillDone(id string, now time.Time) error {
	i, ok := l.ids[id]
	if !ok {
		l.stats.Unknown++
		return fmt.Errorf("routing: prefill_done %q: %w", id, ErrUnknownRequest)
	}
	t := l.tick(now)
	e := &l.entries[i]
	if e.phase == phaseDecode {
		l.stats.RepeatPrefill++
		return nil
	}
	l.unlinkTTL(&l.prefill, i)
	r := &l.slots[e.slot]
	r.PrefillTokens -= e.prefillTokens
	r.PrefillRequests--
	r.DecodeRequests++
	e.phase = phaseDecode
	e.deadline = l.deadline(t, l.cfg.DecodeTTL)
	l.pushTTL(&l.decode, i)
	l.stats.PrefillDone++
	return nil
}

// Free forgets a request: its prefill tokens (if still in prefill) and its
// blocks leave the rank's load.
func (l *Load) Free(id string) error {
	i, ok := l.ids[id]
	if !ok {
		l.stats.Unknown++
		return fmt.Errorf("routing: free %q: %w", id, ErrUnknownRequest)
	}
	l.remove(i)
	l.stats.Freed++
	return nil
}

// Move books a tracked request against another rank — the rank that
// served it after the request path retried past the one it was routed to:
// its prefill tokens (while in prefill) and its blocks leave the old rank's
// sums and join to's; its phase and deadline stay. They are the amounts
// booked at Add (to's own cache overlap is not re-scored: the next-best
// rank usually caches less, so its prefill is understated until
// PrefillDone). Moving to the rank it is on changes nothing.
func (l *Load) Move(id string, to messages.WorkerKey) error {
	i, ok := l.ids[id]
	if !ok {
		l.stats.Unknown++
		return fmt.Errorf("routing: move %q: %w", id, ErrUnknownRequest)
	}
	if l.slots[l.entries[i].slot].Key == to {
		return nil
	}
	dst := l.rankSlot(to) // may grow l.slots: take pointers after it
	e := &l.entries[i]
	from, r := &l.slots[e.slot], &l.slots[dst]
	if r.PrefillRequests+r.DecodeRequests == 0 {
		l.idle--
	}
	from.Blocks -= e.blocks
	r.Blocks += e.blocks
	if e.phase == phasePrefill {
		from.PrefillTokens -= e.prefillTokens
		r.PrefillTokens += e.prefillTokens
		from.PrefillRequests--
		r.PrefillRequests++
	} else {
		from.DecodeRequests--
		r.DecodeRequests++
	}
	if from.PrefillRequests+from.DecodeRequests == 0 {
		l.idle++
	}
	e.slot = dst
	l.stats.Moved++
	return nil
}

// Expire drops every request whose deadline is at or before now (added
// PrefillTTL ago and never PrefillDone, or PrefillDone DecodeTTL ago and
// never freed) and returns how many it dropped.
func (l *Load) Expire(now time.Time) int {
	return l.expire(l.tick(now))
}

func (l *Load) expire(t int64) int {
	n := 0
	for l.prefill.head != nilSlot && l.entries[l.prefill.head].deadline <= t {
		l.remove(l.prefill.head)
		l.stats.ExpiredPrefill++
		n++
	}
	for l.decode.head != nilSlot && l.entries[l.decode.head].deadline <= t {
		l.remove(l.decode.head)
		l.stats.ExpiredDecode++
		n++
	}
	return n
}

// DropWorker forgets every request routed to any dp rank of worker (the
// worker was unregistered) and returns how many it dropped.
func (l *Load) DropWorker(worker messages.WorkerID) int {
	n := 0
	for i := l.age.head; i != nilSlot; {
		next := l.entries[i].ageNext
		if l.slots[l.entries[i].slot].Key.Worker == worker {
			l.remove(i)
			n++
		}
		i = next
	}
	for i := range l.slots {
		if s := &l.slots[i]; s.live && s.Key.Worker == worker {
			l.freeSlot(int32(i)) // idle now
		}
	}
	l.stats.Dropped += uint64(n)
	return n
}
