package simengine

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// Prompt is one request a Driver produces.
type Prompt struct {
	Tokens    []uint32
	SessionID string
	// At is when the request arrives, relative to the first one (trace
	// timestamps); RandomDriver leaves it 0.
	At time.Duration
	// OutputTokens is the trace's output_length (informational; the
	// simulator caches prompts only).
	OutputTokens int
}

// Driver produces prompts. Next returns io.EOF when there are no more.
type Driver interface {
	Next() (Prompt, error)
}

// RandomConfig shapes a RandomDriver. Zero values take the defaults noted.
type RandomConfig struct {
	Seed            uint64
	BlockSize       int    // tokens per block; shared prefixes are whole blocks (default 16)
	Prefixes        int    // shared prefixes in the pool (default 8)
	MaxPrefixBlocks int    // longest shared prefix in blocks (default 32)
	MaxSuffixTokens int    // longest unshared tail (default 64)
	Vocab           uint32 // token ids are < Vocab (default 32000)
	// Sessions names each prompt's session after its prefix ("sess-3").
	Sessions bool
	// Limit stops after this many prompts; 0 means endless.
	Limit int
}

// RandomDriver draws prompts from a seeded pool of shared prefixes: each
// prompt takes a random whole-block cut of one prefix (hot prefixes are
// drawn more often) plus a random unshared tail, so prompts share prefixes
// of varying depth and the cache tree branches. The same seed gives the same
// prompts.
type RandomDriver struct {
	cfg      RandomConfig
	rng      *rand.Rand
	prefixes [][]uint32
	n        int
}

// NewRandomDriver builds the prefix pool.
func NewRandomDriver(cfg RandomConfig) (*RandomDriver, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = 16
	}
	if cfg.Prefixes == 0 {
		cfg.Prefixes = 8
	}
	if cfg.MaxPrefixBlocks == 0 {
		cfg.MaxPrefixBlocks = 32
	}
	if cfg.MaxSuffixTokens == 0 {
		cfg.MaxSuffixTokens = 64
	}
	if cfg.Vocab == 0 {
		cfg.Vocab = 32000
	}
	switch {
	case cfg.BlockSize < 0, cfg.Prefixes < 0, cfg.MaxPrefixBlocks < 0, cfg.MaxSuffixTokens < 0, cfg.Limit < 0:
		return nil, fmt.Errorf("simengine: random driver config has a negative size: %+v", cfg)
	case cfg.Prefixes*cfg.MaxPrefixBlocks*cfg.BlockSize > 1<<26:
		return nil, fmt.Errorf("simengine: random driver pool of %d×%d blocks of %d tokens is too large",
			cfg.Prefixes, cfg.MaxPrefixBlocks, cfg.BlockSize)
	}
	d := &RandomDriver{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed5eed))}
	d.prefixes = make([][]uint32, cfg.Prefixes)
	for i := range d.prefixes {
		d.prefixes[i] = d.tokens(cfg.BlockSize * (1 + d.rng.IntN(cfg.MaxPrefixBlocks)))
	}
	return d, nil
}

// Next returns the next prompt, or io.EOF after Limit prompts.
func (d *RandomDriver) Next() (Prompt, error) {
	if d.cfg.Limit > 0 && d.n >= d.cfg.Limit {
		return Prompt{}, io.EOF
	}
	d.n++
	u := d.rng.Float64()
	i := int(u * u * float64(len(d.prefixes))) // skewed: low indexes are hot
	prefix := d.prefixes[i]
	cut := d.cfg.BlockSize * (1 + d.rng.IntN(len(prefix)/d.cfg.BlockSize))
	p := Prompt{Tokens: append(append([]uint32(nil), prefix[:cut]...), d.tokens(d.rng.IntN(d.cfg.MaxSuffixTokens+1))...)}
	if d.cfg.Sessions {
		p.SessionID = fmt.Sprintf("sess-%d", i)
	}
	return p, nil
}

func (d *RandomDriver) tokens(n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = d.rng.Uint32N(d.cfg.Vocab)
	}
	return t
}

// Loop reads d to its end now and returns a Driver that replays its
// prompts from the first, over and over (token slices are shared, never
// modified): a looped trace costs its parsing once, before the run's clock
// starts. An empty d gives a driver that returns io.EOF; an error of d is
// returned.
func Loop(d Driver) (Driver, error) {
	l := &loopDriver{}
	for {
		p, err := d.Next()
		if errors.Is(err, io.EOF) {
			return l, nil
		}
		if err != nil {
			return nil, err
		}
		l.kept = append(l.kept, p)
	}
}

type loopDriver struct {
	kept []Prompt
	next int
}

func (l *loopDriver) Next() (Prompt, error) {
	if len(l.kept) == 0 {
		return Prompt{}, io.EOF
	}
	p := l.kept[l.next]
	l.next = (l.next + 1) % len(l.kept)
	return p, nil
}
