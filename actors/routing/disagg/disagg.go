package disagg

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Mode says when a request is split into a remote prefill and a decode leg.
type Mode int

// The modes (doc.go).
const (
	// ModeAuto (the default) splits when the chosen decode worker holds
	// too little of the prompt (Config.MaxDecodeHit, MinUncachedTokens).
	ModeAuto Mode = iota
	// ModeAlways splits every request that a prefill worker can take.
	ModeAlways
	// ModeNever never splits: decode workers prefill locally.
	ModeNever
)

// ErrInvalidConfig: a mode, fraction or token count out of range.
var ErrInvalidConfig = errors.New("invalid disaggregation config")

// String is the mode's flag name: auto, always or never.
func (m Mode) String() string {
	switch m {
	case ModeAlways:
		return "always"
	case ModeNever:
		return "never"
	}
	return "auto"
}

// ParseMode reads a mode's flag name (Mode.String).
func ParseMode(s string) (Mode, error) {
	switch strings.TrimSpace(s) {
	case "auto", "":
		return ModeAuto, nil
	case "always":
		return ModeAlways, nil
	case "never":
		return ModeNever, nil
	}
	return 0, fmt.Errorf("disagg: mode %q (want auto, always or never): %w", s, ErrInvalidConfig)
}

// Config is the decision's configuration. Start from DefaultConfig.
type Config struct {
	Mode Mode
	// MinUncachedTokens: in ModeAuto, a request whose part the decode
	// worker does not hold is shorter than this is prefilled locally.
	MinUncachedTokens int
	// MaxDecodeHit: in ModeAuto, a request of which the decode worker
	// already holds at least this fraction (0..1] is prefilled locally.
	MaxDecodeHit float64
}

// Defaults (doc.go, "Why these defaults").
const (
	DefaultMinUncachedTokens = 512
	DefaultMaxDecodeHit      = 0.8
	// MaxMinUncachedTokens bounds Config.MinUncachedTokens (a prompt is
	// at most 2^31 tokens, routing.MaxISL).
	MaxMinUncachedTokens = 1 << 31
)

// DefaultConfig is ModeAuto with the default thresholds.
func DefaultConfig() Config {
	return Config{Mode: ModeAuto, MinUncachedTokens: DefaultMinUncachedTokens, MaxDecodeHit: DefaultMaxDecodeHit}
}

// Validate checks the configuration's ranges.
func (c Config) Validate() error {
	if c.Mode < ModeAuto || c.Mode > ModeNever {
		return fmt.Errorf("disagg: mode %d: %w", c.Mode, ErrInvalidConfig)
	}
	if c.MinUncachedTokens < 0 || c.MinUncachedTokens > MaxMinUncachedTokens {
		return fmt.Errorf("disagg: min uncached tokens %d (0..%d): %w", c.MinUncachedTokens, MaxMinUncachedTokens, ErrInvalidConfig)
	}
	if !(c.MaxDecodeHit > 0 && c.MaxDecodeHit <= 1) { // NaN fails too
		return fmt.Errorf("disagg: max decode hit %v (want a fraction in (0, 1]): %w", c.MaxDecodeHit, ErrInvalidConfig)
	}
	return nil
}

// Request is what the decision needs of the request: its input length and
// its namespace's block size, in tokens.
type Request struct {
	ISL       int64
	BlockSize int64
}

// Decode is the decode worker the cost chose (among decode and both
// roles) and the prompt tokens it already holds.
type Decode struct {
	Key          messages.WorkerKey
	CachedTokens int64
}

// Prefill is one prefill-role candidate: its overlap with the request in
// blocks, the prefill tokens queued on it (booked here and by other
// router hosts), and Tie, the caller's deterministic per-request hash of
// its key for the last tie-break. Saturated candidates (engine signals)
// are taken only when every one is.
type Prefill struct {
	Key           messages.WorkerKey
	OverlapBlocks uint32
	QueuedTokens  int64
	Saturated     bool
	Tie           uint64
}

// Outcome is the decision: whether to split and why (Reason, one of the
// api.Disagg* words, Detail in prose); when split, the prefill worker,
// its overlap and cached tokens, and the prefill tokens it is booked for
// (ISL − cached); and the alternate prefill worker a failed prefill leg
// may be retried on (HasAlternate false when there is none).
type Outcome struct {
	Split  bool
	Reason string
	Detail string

	Prefill       messages.WorkerKey
	OverlapBlocks uint32
	CachedTokens  int64
	PrefillTokens int64

	Alternate    Choice
	HasAlternate bool
}

// Choice is a prefill worker the decision names: its key, its overlap
// with the request in blocks and the prompt tokens that overlap covers.
type Choice struct {
	Key           messages.WorkerKey
	OverlapBlocks uint32
	CachedTokens  int64
}

// Decide splits the request or not (doc.go, "The decision"). It is pure:
// the same inputs always give the same outcome, whatever the order of
// prefills.
func Decide(cfg Config, req Request, dec Decode, prefills []Prefill) Outcome {
	if cfg.Mode == ModeNever {
		return Outcome{Reason: api.DisaggNever, Detail: "disaggregation is configured off"}
	}
	if len(prefills) == 0 {
		return Outcome{Reason: api.DisaggNoPrefillPool, Detail: "no prefill worker is registered in the namespace"}
	}
	uncached := max(req.ISL-dec.CachedTokens, 0)
	var out Outcome
	switch {
	case cfg.Mode == ModeAlways:
		out = Outcome{Split: true, Reason: api.DisaggAlways, Detail: "disaggregation is configured for every request"}
	case req.ISL > 0 && float64(dec.CachedTokens) >= cfg.MaxDecodeHit*float64(req.ISL):
		return Outcome{Reason: api.DisaggWarmDecode,
			Detail: fmt.Sprintf("the decode worker holds %d of %d prompt tokens (at least %.0f %%)", dec.CachedTokens, req.ISL, 100*cfg.MaxDecodeHit)}
	case uncached < int64(cfg.MinUncachedTokens):
		return Outcome{Reason: api.DisaggShortUncached,
			Detail: fmt.Sprintf("%d uncached prompt tokens on the decode worker (fewer than %d)", uncached, cfg.MinUncachedTokens)}
	default:
		out = Outcome{Split: true, Reason: api.DisaggUncached,
			Detail: fmt.Sprintf("%d uncached prompt tokens on the decode worker (at least %d)", uncached, cfg.MinUncachedTokens)}
	}
	p, alt, ok := choosePrefill(req, prefills)
	out.Prefill, out.OverlapBlocks = p.Key, p.OverlapBlocks
	out.CachedTokens = cachedTokens(req, p.OverlapBlocks)
	out.PrefillTokens = req.ISL - out.CachedTokens
	if ok {
		out.Alternate = Choice{Key: alt.Key, OverlapBlocks: alt.OverlapBlocks, CachedTokens: cachedTokens(req, alt.OverlapBlocks)}
		out.HasAlternate = true
	}
	return out
}

// cachedTokens is min(overlap × block size, ISL).
func cachedTokens(req Request, overlap uint32) int64 {
	return min(int64(overlap)*req.BlockSize, req.ISL)
}

// choosePrefill is the prefill candidate that would finish the request's
// prefill first: the fewest tokens to compute, queued plus the request's
// uncached ones; then the larger overlap, the lower Tie, the lower key.
// An unsaturated candidate always beats a saturated one. The alternate is
// the runner-up by the same order among the candidates of other workers
// than the best's (another rank of the same engine shares its failure);
// ok is false when there is none.
func choosePrefill(req Request, prefills []Prefill) (best, alt Prefill, ok bool) {
	best = prefills[0]
	bestWork := work(req, best)
	for _, p := range prefills[1:] {
		if w := work(req, p); better(p, w, best, bestWork) {
			best, bestWork = p, w
		}
	}
	var altWork int64
	for _, p := range prefills {
		if p.Key.Worker == best.Key.Worker {
			continue
		}
		if w := work(req, p); !ok || better(p, w, alt, altWork) {
			alt, altWork, ok = p, w, true
		}
	}
	return best, alt, ok
}

func work(req Request, p Prefill) int64 {
	return max(p.QueuedTokens, 0) + req.ISL - cachedTokens(req, p.OverlapBlocks)
}

func better(p Prefill, w int64, b Prefill, bw int64) bool {
	switch {
	case p.Saturated != b.Saturated:
		return !p.Saturated
	case w != bw:
		return w < bw
	case p.OverlapBlocks != b.OverlapBlocks:
		return p.OverlapBlocks > b.OverlapBlocks
	case p.Tie != b.Tie:
		return p.Tie < b.Tie
	case p.Key.Worker != b.Key.Worker:
		return p.Key.Worker < b.Key.Worker
	}
	return p.Key.DpRank < b.Key.DpRank
}
