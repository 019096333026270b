package routing

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
)

// Decision errors.
var (
	// ErrNoCandidates: Decide was given no candidate.
	ErrNoCandidates = errors.New("no candidate workers")
	// ErrInvalidRequest: block size or input length out of range.
	ErrInvalidRequest = errors.New("invalid route request")
	// ErrInvalidConfig: a weight or temperature that is negative or not
	// finite.
	ErrInvalidConfig = errors.New("invalid routing config")
)

// Request bounds.
const (
	MaxBlockSize = 1 << 20
	MaxISL       = 1 << 31
)

// Default sampling seed, used when Config.Rand is nil (PCG(seed1, seed2)).
const (
	DefaultSeed1 = 0x6b76726f75746572 // "kvrouter"
	DefaultSeed2 = 0x726f7574696e6721 // "routing!"
)

// Config is the cost function's configuration. Start from DefaultConfig:
// every field is used as given (an OverlapWeight of 0 means load-only
// routing, not "default").
type Config struct {
	// OverlapWeight multiplies prefill_blocks in the logit (§7; default 1).
	OverlapWeight float64
	// Temperature 0 picks the argmin deterministically; > 0 samples (§7).
	Temperature float64
	// Rand drives sampling at Temperature > 0 (one Uint64 per decision).
	// nil: a PCG seeded with DefaultSeed1, DefaultSeed2.
	Rand rand.Source
	// Load bounds the request bookkeeping.
	Load LoadConfig
}

// DefaultConfig returns §7's defaults: overlap weight 1, temperature 0.
func DefaultConfig() Config {
	return Config{OverlapWeight: 1}
}

// Request is what Decide needs of a route request.
type Request struct {
	// ID is the caller's request id; it is the bookkeeping key (Route) and,
	// when Hash is 0, the tie-break hash is XXH3-64(ID, seed 0).
	ID string
	// Hash is a stable hash of the request for the tie-break (0: derive it
	// from ID). A content hash — e.g. the sequence hash of the request's
	// last complete block — sends identical prompts that tie to the same
	// worker; a hash of the id spreads them.
	Hash uint64
	// ISL is the request's input length in tokens.
	ISL int
	// BlockSize is the block size of the candidates' namespace, in tokens.
	BlockSize int
	// WithScores asks for Decision.Scores.
	WithScores bool
}

// Overlap is one (worker, dp_rank)'s matched prefix from the index: the
// number of contiguous blocks from block 0 that it holds.
type Overlap struct {
	Key    messages.WorkerKey
	Blocks uint32
}

// Candidate is one (worker, dp_rank) that may take the request. Degraded
// means the index's view of it is not exact; it is still scored with the
// overlap the index reports, and decisions say so.
type Candidate struct {
	Key      messages.WorkerKey
	Degraded bool
}

// Score is one candidate's evaluation.
type Score struct {
	Key           messages.WorkerKey
	OverlapBlocks uint32
	// CachedTokens is min(OverlapBlocks × block size, ISL).
	CachedTokens int64
	// ActivePrefillTokens and DecodeBlocks are the rank's load.
	ActivePrefillTokens int64
	DecodeBlocks        int64
	// PrefillBlocks is (ActivePrefillTokens + ISL − CachedTokens) / block size.
	PrefillBlocks float64
	// Logit is OverlapWeight × PrefillBlocks + DecodeBlocks; lower is better.
	Logit float64
	// Probability is the candidate's chance at Temperature > 0 (0 at
	// Temperature 0).
	Probability float64
	Degraded    bool
}

// Decision is the outcome of Decide.
type Decision struct {
	// Worker is the chosen (worker, dp_rank).
	Worker        messages.WorkerKey
	OverlapBlocks uint32
	// CachedTokens is min(OverlapBlocks × block size, ISL).
	CachedTokens int64
	// PrefillTokens (ISL − CachedTokens) and RequestBlocks (⌈ISL / block
	// size⌉) are the load the request adds to Worker: what Route passes to
	// Load.Add.
	PrefillTokens int64
	RequestBlocks int64
	// Logit is the chosen candidate's logit.
	Logit float64
	// Degraded: the chosen candidate is degraded. DegradedCandidates counts
	// the degraded candidates (any of them can make the choice less than
	// ideal).
	Degraded           bool
	DegradedCandidates int
	// Sampled: chosen by softmax sampling (Temperature > 0).
	Sampled bool
	// Tied counts the candidates that shared the lowest logit at Temperature
	// 0 (1 when there was no tie).
	Tied int
	// Scores holds every candidate's Score, in candidate order, when
	// Request.WithScores is set. It is the Router's buffer: valid until its
	// next Decide or Route; copy it to keep it.
	Scores []Score
}

// Router is the routing decision core: the cost function of §7 over the
// candidates, with the request bookkeeping (Load) that supplies the load
// terms. It is a plain value for one goroutine (an actor's state): no
// clock, no goroutines; the same inputs and the same Rand state always give
// the same decision.
type Router struct {
	cfg  Config
	load *Load
	rng  rand.Source

	// scratch, reused across decisions
	ov     []uint32
	ovTab  ovTable
	rows   []row
	scores []Score
	hints  []hint // per candidate position: its rank slot in load
}

// hint caches, for the candidate at one position, the key it held and that
// key's slot in Load (-1: no slot while Load.slotGen was gen; -2: unknown).
// A hint is used only after checking it: same key at the position, and for a
// slot, the slot still live with that key; for no slot, no slot created
// since — so a stale hint costs one map lookup, never a wrong load.
type hint struct {
	key  messages.WorkerKey
	slot int32
	gen  uint64
}

// row is one candidate's evaluation inside Decide.
type row struct {
	logit   float64
	blocks  int64
	prefill int64
	ov      uint32
}

// New returns a Router with empty load.
func New(cfg Config) (*Router, error) {
	if !finiteNonNeg(cfg.OverlapWeight) {
		return nil, fmt.Errorf("routing: overlap weight %v: %w", cfg.OverlapWeight, ErrInvalidConfig)
	}
	if !finiteNonNeg(cfg.Temperature) {
		return nil, fmt.Errorf("routing: temperature %v: %w", cfg.Temperature, ErrInvalidConfig)
	}
	rng := cfg.Rand
	if rng == nil {
		rng = rand.NewPCG(DefaultSeed1, DefaultSeed2)
	}
	return &Router{cfg: cfg, load: NewLoad(cfg.Load), rng: rng}, nil
}

func finiteNonNeg(f float64) bool { return f >= 0 && !math.IsInf(f, 1) }

// Config returns the configuration (load defaults applied).
func (r *Router) Config() Config {
	c := r.cfg
	c.Load = r.load.Config()
	return c
}

// Load returns the request bookkeeping: PrefillDone, Free, Expire, stats.
func (r *Router) Load() *Load { return r.load }

// Route expires due requests, decides, and tracks the request under req.ID
// on the chosen worker. A duplicate or invalid id fails before deciding (no
// Rand draw). When the table is full and RefuseWhenFull is set, the decision
// is returned together with an ErrFull error: it is valid, only untracked.
func (r *Router) Route(req Request, overlaps []Overlap, cands []Candidate, now time.Time) (Decision, error) {
	r.load.Expire(now)
	if err := r.load.CheckID(req.ID); err != nil {
		if errors.Is(err, ErrDuplicateRequest) {
			r.load.stats.Duplicate++
		} else {
			r.load.stats.InvalidID++
		}
		return Decision{}, err
	}
	d, err := r.Decide(req, overlaps, cands)
	if err != nil {
		return Decision{}, err
	}
	return d, r.load.Add(req.ID, d.Worker, d.PrefillTokens, d.RequestBlocks, now)
}

// Decide scores every candidate with §7's cost and picks one; it does not
// change the load. Candidates absent from overlaps have overlap 0; an
// overlap for a key that is not a candidate is ignored; a key listed twice
// in overlaps counts with its largest value. Candidates should be distinct
// (a duplicate is scored twice: harmless at temperature 0, double weight
// when sampling).
//
// At Temperature 0 the lowest logit wins, ties broken as the package
// documentation says; at Temperature > 0 the choice is sampled.
func (r *Router) Decide(req Request, overlaps []Overlap, cands []Candidate) (Decision, error) {
	n := len(cands)
	if n == 0 {
		return Decision{}, fmt.Errorf("routing: decide: %w", ErrNoCandidates)
	}
	if req.BlockSize <= 0 || req.BlockSize > MaxBlockSize {
		return Decision{}, fmt.Errorf("routing: decide: block size %d (1..%d): %w", req.BlockSize, MaxBlockSize, ErrInvalidRequest)
	}
	if req.ISL < 0 || req.ISL > MaxISL {
		return Decision{}, fmt.Errorf("routing: decide: isl %d (0..%d): %w", req.ISL, MaxISL, ErrInvalidRequest)
	}
	ov := r.resolveOverlaps(overlaps, cands)
	if cap(r.rows) < n {
		r.rows = make([]row, n)
	}
	rows := r.rows[:n]
	hints := r.resolveHints(cands)
	slots := r.load.slots

	bs, isl := int64(req.BlockSize), int64(req.ISL)
	fbs := float64(bs)
	w := r.cfg.OverlapWeight
	degraded := 0
	best, tied := 0, 0
	var reqHash uint64
	hashed := false
	for i := range cands {
		c := &cands[i]
		var o uint32
		if ov != nil {
			o = ov[i]
		}
		var p, b int64
		if h := hints[i].slot; h >= 0 {
			p, b = slots[h].PrefillTokens, slots[h].Blocks
		}
		cached := min(int64(o)*bs, isl)
		logit := w*(float64(p+isl-cached)/fbs) + float64(b)
		rows[i] = row{logit: logit, blocks: b, prefill: p, ov: o}
		if c.Degraded {
			degraded++
		}
		if i == 0 {
			tied = 1
			continue
		}
		// Temperature 0 argmin with the documented tie-break; computed at
		// any temperature (cheap) so Tied is always filled.
		bst := &rows[best]
		switch {
		case logit < bst.logit:
			best, tied = i, 1
		case logit == bst.logit:
			tied++
			if b != bst.blocks {
				if b < bst.blocks {
					best = i
				}
				continue
			}
			if p != bst.prefill {
				if p < bst.prefill {
					best = i
				}
				continue
			}
			if !hashed {
				reqHash, hashed = requestHash(req), true
			}
			th, bh := tieHash(reqHash, c.Key), tieHash(reqHash, cands[best].Key)
			if th < bh || (th == bh && keyLess(c.Key, cands[best].Key)) {
				best = i
			}
		}
	}

	d := Decision{DegradedCandidates: degraded, Tied: tied}
	if r.cfg.Temperature > 0 {
		best = r.sample(rows, cands, requestHash(req))
		d.Sampled = true
	}
	if req.WithScores {
		d.Scores = r.fillScores(req, rows, cands)
	}
	c, rw := cands[best], rows[best]
	d.Worker = c.Key
	d.OverlapBlocks = rw.ov
	d.CachedTokens = min(int64(rw.ov)*bs, isl)
	d.PrefillTokens = isl - d.CachedTokens
	d.RequestBlocks = (isl + bs - 1) / bs
	d.Logit = rw.logit
	d.Degraded = c.Degraded
	return d, nil
}

// resolveHints makes r.hints[i].slot the Load slot of cands[i] (or -1),
// reusing what the previous decisions found: with a stable candidate list
// this is one key comparison per candidate instead of a map lookup.
func (r *Router) resolveHints(cands []Candidate) []hint {
	n := len(cands)
	if cap(r.hints) < n {
		r.hints = make([]hint, n)
		for i := range r.hints {
			r.hints[i].slot = -2 // unknown
		}
	}
	hints := r.hints[:n]
	l := r.load
	slots := l.slots
	gen := l.slotGen
	for i := range cands {
		k, h := cands[i].Key, &hints[i]
		if h.key == k {
			if h.slot >= 0 && int(h.slot) < len(slots) && slots[h.slot].live && slots[h.slot].Key == k {
				continue
			}
			if h.slot == -1 && h.gen == gen {
				continue
			}
		}
		h.key, h.slot, h.gen = k, l.lookupSlot(k), gen
	}
	return hints
}

// resolveOverlaps returns the overlap of every candidate, aligned with
// cands, or nil when there is none: a linear scan for up to 8 overlaps,
// else a reused open-addressing table.
func (r *Router) resolveOverlaps(overlaps []Overlap, cands []Candidate) []uint32 {
	m := len(overlaps)
	if m == 0 {
		return nil
	}
	n := len(cands)
	if cap(r.ov) < n {
		r.ov = make([]uint32, n)
	}
	ov := r.ov[:n]
	if m <= 8 {
		// A 64-bit filter on the worker id skips most candidates without
		// touching the overlaps.
		var filter uint64
		for j := range overlaps {
			filter |= 1 << (uint64(overlaps[j].Key.Worker) & 63)
		}
		for i := range cands {
			k := cands[i].Key
			var best uint32
			if filter&(1<<(uint64(k.Worker)&63)) != 0 {
				for j := range overlaps {
					if overlaps[j].Key == k && overlaps[j].Blocks > best {
						best = overlaps[j].Blocks
					}
				}
			}
			ov[i] = best
		}
		return ov
	}
	t := &r.ovTab
	t.reset(m)
	for _, o := range overlaps {
		t.putMax(o.Key, o.Blocks)
	}
	for i := range cands {
		ov[i] = t.get(cands[i].Key)
	}
	return ov
}

// ovTable is an open-addressing (linear probing) map from key to overlap,
// cleared in O(1) by a stamp per slot.
type ovTable struct {
	keys  []messages.WorkerKey
	vals  []uint32
	stamp []uint32
	cur   uint32
	mask  uint64
}

// reset empties the table and sizes it for m keys (load ≤ 1/2).
func (t *ovTable) reset(m int) {
	size := 16
	for size < 2*m {
		size <<= 1
	}
	if len(t.keys) < size {
		t.keys = make([]messages.WorkerKey, size)
		t.vals = make([]uint32, size)
		t.stamp = make([]uint32, size)
		t.cur = 0
	}
	t.mask = uint64(size - 1)
	t.cur++
	if t.cur == 0 { // wrapped: stamps from 2^32 resets ago would look current
		clear(t.stamp)
		t.cur = 1
	}
}

func (t *ovTable) putMax(k messages.WorkerKey, v uint32) {
	for i := keyHash(k) & t.mask; ; i = (i + 1) & t.mask {
		if t.stamp[i] != t.cur {
			t.stamp[i], t.keys[i], t.vals[i] = t.cur, k, v
			return
		}
		if t.keys[i] == k {
			t.vals[i] = max(t.vals[i], v)
			return
		}
	}
}

func (t *ovTable) get(k messages.WorkerKey) uint32 {
	for i := keyHash(k) & t.mask; ; i = (i + 1) & t.mask {
		if t.stamp[i] != t.cur {
			return 0
		}
		if t.keys[i] == k {
			return t.vals[i]
		}
	}
}

// sample draws one candidate with probability softmax(−norm/T), where
// norm = (logit − min) / (max − min) (all equal: uniform). It races
// exponential clocks: the winner is the argmin of E_i × exp(norm_i/T) with
// E_i = −ln U_i (the Gumbel-max trick in product form), U_i derived from one
// Rand draw and the candidate's key, so the draw does not depend on the
// candidates' order. Exact ties fall back to the temperature-0 order.
func (r *Router) sample(rows []row, cands []Candidate, reqHash uint64) int {
	lo, span := logitRange(rows)
	t := r.cfg.Temperature
	seed := r.rng.Uint64()
	best, bestKey := -1, 0.0
	for i := range rows {
		u := unitOpen(mix64(seed ^ keyHash(cands[i].Key)))
		nrm := normalized(rows[i].logit, lo, span)
		// Pruning, exact: −ln u ≥ 1 − u and exp(x) ≥ 1 + x, so a candidate
		// whose lower bound exceeds the best key (with a margin for
		// rounding) cannot win, and its log and exp are skipped.
		if best >= 0 && (1-u)*(1+nrm/t)*(1-1e-9) > bestKey {
			continue
		}
		k := -math.Log(u)
		if nrm > 0 {
			k *= math.Exp(nrm / t) // +Inf for a vanishing t: never chosen over a minimum
		}
		if best < 0 || k < bestKey ||
			(k == bestKey && rowBetter(&rows[i], &rows[best], cands[i].Key, cands[best].Key, reqHash)) {
			best, bestKey = i, k
		}
	}
	return best
}

// logitRange returns the lowest logit and max − min.
func logitRange(rows []row) (lo, span float64) {
	lo, hi := rows[0].logit, rows[0].logit
	for i := 1; i < len(rows); i++ {
		lo, hi = min(lo, rows[i].logit), max(hi, rows[i].logit)
	}
	return lo, hi - lo
}

// normalized is the min-max normalised logit in [0, 1] (0 when all logits
// are equal). Dividing it by the temperature afterwards keeps a tiny
// temperature from producing 0 × Inf.
func normalized(logit, lo, span float64) float64 {
	if span <= 0 {
		return 0
	}
	return (logit - lo) / span
}

// rowBetter is the temperature-0 order (without the logit) for the
// measure-zero case of equal sampled keys.
func rowBetter(a, b *row, ak, bk messages.WorkerKey, h uint64) bool {
	if a.logit != b.logit {
		return a.logit < b.logit
	}
	if a.blocks != b.blocks {
		return a.blocks < b.blocks
	}
	if a.prefill != b.prefill {
		return a.prefill < b.prefill
	}
	ta, tb := tieHash(h, ak), tieHash(h, bk)
	if ta != tb {
		return ta < tb
	}
	return keyLess(ak, bk)
}

// fillScores writes every candidate's Score into the reused buffer.
func (r *Router) fillScores(req Request, rows []row, cands []Candidate) []Score {
	n := len(rows)
	if cap(r.scores) < n {
		r.scores = make([]Score, n)
	}
	s := r.scores[:n]
	bs, isl := int64(req.BlockSize), int64(req.ISL)
	for i := range rows {
		rw := &rows[i]
		cached := min(int64(rw.ov)*bs, isl)
		s[i] = Score{
			Key:                 cands[i].Key,
			OverlapBlocks:       rw.ov,
			CachedTokens:        cached,
			ActivePrefillTokens: rw.prefill,
			DecodeBlocks:        rw.blocks,
			PrefillBlocks:       float64(rw.prefill+isl-cached) / float64(bs),
			Logit:               rw.logit,
			Degraded:            cands[i].Degraded,
		}
	}
	if t := r.cfg.Temperature; t > 0 {
		lo, span := logitRange(rows)
		sum := 0.0
		for i := range s {
			s[i].Probability = math.Exp(-normalized(rows[i].logit, lo, span) / t)
			sum += s[i].Probability
		}
		for i := range s {
			s[i].Probability /= sum
		}
	}
	return s
}

// requestHash is Request.Hash, or XXH3-64(ID) when Hash is 0.
func requestHash(req Request) uint64 {
	if req.Hash != 0 {
		return req.Hash
	}
	return xxh3.HashString(req.ID)
}

// keyHash mixes a (worker, dp_rank) into 64 bits:
// mix64(worker XOR mix64(dp_rank + 0x9E3779B97F4A7C15)).
func keyHash(k messages.WorkerKey) uint64 {
	return mix64(uint64(k.Worker) ^ mix64(uint64(k.DpRank)+0x9E3779B97F4A7C15))
}

// tieHash is the request-specific rank of a candidate among equals:
// mix64(requestHash XOR keyHash(key)); lower wins.
func tieHash(h uint64, k messages.WorkerKey) uint64 {
	return mix64(h ^ keyHash(k))
}

// mix64 is the SplitMix64 finalizer (a bijection on 64 bits).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// unitOpen maps 64 random bits to a float64 in (0, 1).
func unitOpen(x uint64) float64 {
	return (float64(x>>11) + 0.5) / (1 << 53)
}

// keyLess orders keys by worker id, then dp rank.
func keyLess(a, b messages.WorkerKey) bool {
	if a.Worker != b.Worker {
		return a.Worker < b.Worker
	}
	return a.DpRank < b.DpRank
}
