package routing

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing/disagg"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
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
	// Cost is the cost function (doc.go, Cost): CostKVRouter (the default)
	// or CostDynamo (the reference's).
	Cost Cost
	// OverlapWeight multiplies the uncached blocks in the logit (doc.go,
	// Cost; DefaultOverlapWeight, the reference's 1 with CostDynamo).
	OverlapWeight float64
	// CacheFalloff is how fast a busy candidate's cache credit falls with
	// CostKVRouter (doc.go, Cost): a candidate tracking more requests than
	// the candidates' mean has its cached blocks credited at
	// OverlapWeight / (1 + CacheFalloff × (r − 1)²), r = (requests + 1) /
	// (mean + 1). 0: every cached block earns the full weight. CostDynamo
	// ignores it.
	CacheFalloff float64
	// PredictedWaitFalloff is how fast the credit of blocks a candidate
	// only holds by prediction (Overlap.Predicted) falls with the requests
	// still to prefill them there and the share of idle candidates
	// (wait.go): credited at 1 / (1 + waiting × idle share /
	// PredictedWaitFalloff). 0: predicted blocks earn full credit.
	PredictedWaitFalloff float64
	// PredictedWaitCheck withholds the credit of a candidate's predicted
	// blocks that requests routed there still wait to prefill when an
	// idle candidate prefilling the request whole reaches its first token
	// sooner, by more than the recompute's share of the idle candidates
	// (wait.go). false: full credit.
	PredictedWaitCheck bool
	// Temperature 0 picks the argmin deterministically; > 0 samples (doc.go).
	Temperature float64
	// Rand drives sampling at Temperature > 0 (one Uint64 per decision).
	// nil: a PCG seeded with DefaultSeed1, DefaultSeed2.
	Rand rand.Source
	// Load bounds the request bookkeeping (both tables: requests, and
	// split requests' prefill legs).
	Load LoadConfig
	// Disagg is the prefill/decode decision of namespaces with roles
	// (RouteSplit; package disagg). The zero value is
	// disagg.DefaultConfig().
	Disagg disagg.Config
	// Now is the route actor's clock (Props, PredictingProps): the time
	// its predictions expire by, its bookings age by (Load's TTLs) and
	// its pending selections wait by. nil: time.Now, the wall clock. A
	// replay on a modelled clock (kvrouter-bench --quality) passes the
	// model's, so every time the actor reads is the model's. A
	// RouteRequest's Deadline is always checked against the wall clock:
	// it is when the asker stops waiting. The Router never reads it (its
	// methods take the time as an argument).
	Now func() time.Time
}

// kvrouter's cost at its defaults (doc.go, "Why this default").
const (
	// DefaultOverlapWeight is the weight of the request's own uncached
	// prefill blocks.
	DefaultOverlapWeight = 16
	// DefaultCacheFalloff is Config.CacheFalloff's default.
	DefaultCacheFalloff = 1
	// DefaultPredictedWaitFalloff is Config.PredictedWaitFalloff's
	// default: off. It pays on large fleets under bursts and costs small
	// ones a little hit rate (wait.go, bench/README.md).
	DefaultPredictedWaitFalloff = 0
	// DefaultPredictedWaitCheck is Config.PredictedWaitCheck's default:
	// on (wait.go, bench/README.md).
	DefaultPredictedWaitCheck = true
)

// DefaultConfig returns the router's defaults: kvrouter's cost, overlap
// weight DefaultOverlapWeight, cache falloff DefaultCacheFalloff,
// predicted-wait falloff DefaultPredictedWaitFalloff, predicted-wait check
// DefaultPredictedWaitCheck, temperature 0.
func DefaultConfig() Config {
	return Config{Cost: CostKVRouter, OverlapWeight: DefaultOverlapWeight, CacheFalloff: DefaultCacheFalloff,
		PredictedWaitFalloff: DefaultPredictedWaitFalloff, PredictedWaitCheck: DefaultPredictedWaitCheck}
}

// DynamoConfig returns the reference router's (Dynamo's KV router) cost at
// its defaults: overlap weight 1, temperature 0.
func DynamoConfig() Config {
	return Config{Cost: CostDynamo, OverlapWeight: 1}
}

// Cost names a cost function (doc.go, Cost).
type Cost int

// The cost functions.
const (
	// CostKVRouter: logit = overlap_weight × (new_prefill_blocks +
	// busy × cached_blocks) + queued_prefill_blocks + decode_blocks, busy
	// the share of its cache credit a busy candidate loses (doc.go, Cost).
	CostKVRouter Cost = iota
	// CostDynamo: logit = overlap_weight × (queued + new prefill blocks) +
	// decode_blocks, the reference's.
	CostDynamo
)

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
	// Lora is the request's LoRA adapter ("" none): candidates whose
	// engine reports its adapters are preferred by LoRA affinity
	// (reported.go).
	Lora string
	// KeepRoom makes Route's booking conditional (room.go; zero: none).
	KeepRoom api.RoomRule
}

// Overlap is one (worker, dp_rank)'s matched prefix from the index: the
// number of contiguous blocks from block 0 that it holds.
type Overlap struct {
	Key    messages.WorkerKey
	Blocks uint32
	// Predicted is how many of Blocks (the last ones) only a prediction
	// says Key holds, and Waiting how many requests routed there are still
	// to prefill them (both 0 for the index's overlaps): with
	// Config.PredictedWaitFalloff those blocks earn less credit (wait.go).
	Predicted uint32
	Waiting   uint32
}

// Candidate is one (worker, dp_rank) that may take the request. Degraded
// means the index's view of it is not exact; it is still scored with the
// overlap the index reports, and decisions say so.
type Candidate struct {
	Key      messages.WorkerKey
	Degraded bool
	// Remote is the load other router hosts booked on the candidate (a
	// cluster: each host books the requests it routed); it adds to this
	// Router's own bookkeeping when scoring (zero on one host).
	Remote RemoteLoad
	// Reported is what the candidate's engine last reported (reported.go;
	// zero: nothing). Router.Observe derives the outside load from it.
	Reported Reported
	// HitCredit is the share of its overlap the cost credits (package
	// hitcheck: below 1 while the engine's reported hits stay far below
	// the router's predictions there); 0 means 1, full credit.
	HitCredit float64
	// Role is the candidate's registered role (api.RolePrefill,
	// RoleDecode, RoleBoth or ""): split.go.
	Role    string
	outside RemoteLoad
}

// RemoteLoad is load booked elsewhere: the cost's active prefill tokens and
// decode blocks, and the requests they belong to (the cache falloff's
// count; 0 when the caller does not know it).
type RemoteLoad struct{ PrefillTokens, Blocks, Requests int64 }

// Score is one candidate's evaluation.
type Score struct {
	Key           messages.WorkerKey
	OverlapBlocks uint32
	// CachedTokens is min(OverlapBlocks × block size, ISL).
	CachedTokens int64
	// ActivePrefillTokens, DecodeBlocks and Requests (tracked, in either
	// phase) are the rank's load.
	ActivePrefillTokens int64
	DecodeBlocks        int64
	Requests            int64
	// PrefillBlocks is (ActivePrefillTokens + ISL − CachedTokens) / block size.
	PrefillBlocks float64
	// Logit is the cost (doc.go, Cost); lower is better.
	Logit float64
	// Probability is the candidate's chance at Temperature > 0 (0 at
	// Temperature 0).
	Probability float64
	Degraded    bool
	// Saturated: the candidate's engine is saturated (Reported);
	// OutsideRequests and OutsideBlocks are the outside load included in
	// Requests and DecodeBlocks.
	Saturated                      bool
	OutsideRequests, OutsideBlocks int64
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
	// Saturated: the chosen candidate is saturated, which only happens
	// when every candidate is (SaturatedCandidates counts them).
	Saturated           bool
	SaturatedCandidates int
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

// Router is the routing decision core: the cost function (doc.go) over the
// candidates, with the request bookkeeping (Load) that supplies the load
// terms. It is a plain value for one goroutine (an actor's state): no
// clock, no goroutines; the same inputs and the same Rand state always give
// the same decision.
type Router struct {
	cfg  Config
	load *Load
	pre  *Load // split requests' prefill legs (split.go)
	rng  rand.Source

	// scratch, reused across decisions
	ov     []uint32
	ovTab  ovTable
	rows   []row
	scores []Score
	hints  []hint // per candidate position: its rank slot in load
	// waiting: the decision's predicted overlaps still to prefill (wait.go)
	waiting []Overlap
	// withheld counts the candidates whose predicted blocks
	// PredictedWaitCheck left without credit (wait.go).
	withheld uint64
	// observed is each candidate's outside load at its last scrape
	// (reported.go).
	observed map[messages.WorkerKey]observed
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
	reqs    int64
	ov      uint32
	credit  float64 // the share of the overlap the cost credits (Candidate.HitCredit)
	sat     bool
	tier    uint8 // preference tier, lower first (reported.go)
}

// New returns a Router with empty load.
func New(cfg Config) (*Router, error) {
	if !finiteNonNeg(cfg.OverlapWeight) {
		return nil, fmt.Errorf("routing: overlap weight %v: %w", cfg.OverlapWeight, ErrInvalidConfig)
	}
	if !finiteNonNeg(cfg.CacheFalloff) {
		return nil, fmt.Errorf("routing: cache falloff %v: %w", cfg.CacheFalloff, ErrInvalidConfig)
	}
	if !finiteNonNeg(cfg.PredictedWaitFalloff) {
		return nil, fmt.Errorf("routing: predicted wait falloff %v: %w", cfg.PredictedWaitFalloff, ErrInvalidConfig)
	}
	if !finiteNonNeg(cfg.Temperature) {
		return nil, fmt.Errorf("routing: temperature %v: %w", cfg.Temperature, ErrInvalidConfig)
	}
	if cfg.Disagg == (disagg.Config{}) {
		cfg.Disagg = disagg.DefaultConfig()
	}
	if err := cfg.Disagg.Validate(); err != nil {
		return nil, fmt.Errorf("routing: %w: %w", ErrInvalidConfig, err)
	}
	rng := cfg.Rand
	if rng == nil {
		rng = rand.NewPCG(DefaultSeed1, DefaultSeed2)
	}
	return &Router{cfg: cfg, load: NewLoad(cfg.Load), pre: NewLoad(cfg.Load), rng: rng}, nil
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
// is returned together with an ErrFull error: it is valid, only untracked;
// so is one that req.KeepRoom refuses (api.ErrRoomKept, room.go).
func (r *Router) Route(req Request, overlaps []Overlap, cands []Candidate, now time.Time) (Decision, error) {
	r.load.Expire(now)
	if err := r.load.CheckID(req.ID); err != nil {
		r.countBadID(err)
		return Decision{}, err
	}
	d, err := r.Decide(req, overlaps, cands)
	if err != nil {
		return Decision{}, err
	}
	if err := r.keepRoom(req.KeepRoom, cands, d.Worker); err != nil {
		return d, err
	}
	return d, r.load.Add(req.ID, d.Worker, d.PrefillTokens, d.RequestBlocks, now)
}

// Decide scores every candidate with the cost (doc.go) and picks one; it does not
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
	degraded, saturated := 0, 0
	minTier := uint8(255)
	var reqSum int64
	for i := range cands {
		c := &cands[i]
		var o uint32
		if ov != nil {
			o = ov[i]
		}
		p, b, q := c.Remote.PrefillTokens, c.Remote.Blocks+c.outside.Blocks, c.Remote.Requests+c.outside.Requests
		if h := hints[i].slot; h >= 0 {
			s := &slots[h]
			p, b, q = p+s.PrefillTokens, b+s.Blocks, q+int64(s.PrefillRequests+s.DecodeRequests)
		}
		credit := 1.0
		if c.HitCredit > 0 && c.HitCredit < 1 {
			credit = c.HitCredit
		}
		rows[i] = row{blocks: b, prefill: p, reqs: q, ov: o, credit: credit, sat: c.Reported.Saturated, tier: tierOf(&c.Reported, req.Lora)}
		minTier = min(minTier, rows[i].tier)
		reqSum += q
		if c.Degraded {
			degraded++
		}
		if c.Reported.Saturated {
			saturated++
		}
	}
	if (r.cfg.PredictedWaitFalloff > 0 || r.cfg.PredictedWaitCheck) && ov != nil {
		r.discountWaiting(overlaps, cands, ov, rows, isl, bs, minTier)
	}
	cost := costTerms{cost: r.cfg.Cost, weight: r.cfg.OverlapWeight, falloff: r.cfg.CacheFalloff,
		meanReqs: float64(reqSum) / float64(n), bs: bs, isl: isl}
	best, tied := 0, 0
	var reqHash uint64
	hashed := false
	for i := range cands {
		c := &cands[i]
		rows[i].logit = cost.logit(&rows[i])
		logit, b, p := rows[i].logit, rows[i].blocks, rows[i].prefill
		if i == 0 {
			tied = 1
			continue
		}
		// Temperature 0 argmin with the documented tie-break; computed at
		// any temperature (cheap) so Tied is always filled.
		bst := &rows[best]
		if rows[i].tier != bst.tier { // saturation and LoRA affinity first (reported.go)
			if rows[i].tier < bst.tier {
				best, tied = i, 1
			}
			continue
		}
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

	d := Decision{DegradedCandidates: degraded, Tied: tied, SaturatedCandidates: saturated}
	if r.cfg.Temperature > 0 {
		best = r.sample(rows, cands, requestHash(req), minTier)
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
	d.Saturated = rw.sat
	return d, nil
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
			Requests:            rw.reqs,
			PrefillBlocks:       float64(rw.prefill+isl-cached) / float64(bs),
			Logit:               rw.logit,
			Degraded:            cands[i].Degraded,
			Saturated:           rw.sat,
			OutsideRequests:     cands[i].outside.Requests,
			OutsideBlocks:       cands[i].outside.Blocks,
		}
	}
	if t := r.cfg.Temperature; t > 0 {
		minTier := slices.MinFunc(rows, func(a, b row) int { return int(a.tier) - int(b.tier) }).tier
		lo, span := logitRange(rows, minTier)
		sum := 0.0
		for i := range s {
			if rows[i].tier > minTier {
				s[i].Probability = 0
				continue
			}
			s[i].Probability = math.Exp(-normalized(rows[i].logit, lo, span) / t)
			sum += s[i].Probability
		}
		for i := range s {
			s[i].Probability /= sum
		}
	}
	return s
}

// String is the cost's flag name: "kvrouter" or "dynamo".
func (c Cost) String() string {
	if c == CostDynamo {
		return "dynamo"
	}
	return "kvrouter"
}

// ParseCost reads a cost's flag name (Cost.String).
func ParseCost(s string) (Cost, error) {
	switch s {
	case "kvrouter":
		return CostKVRouter, nil
	case "dynamo":
		return CostDynamo, nil
	}
	return 0, fmt.Errorf("routing: cost %q (want kvrouter or dynamo): %w", s, ErrInvalidConfig)
}

// CostConfig is the default configuration of cost c: DefaultConfig for
// CostKVRouter, DynamoConfig for CostDynamo.
func CostConfig(c Cost) Config {
	if c == CostDynamo {
		return DynamoConfig()
	}
	return DefaultConfig()
}
