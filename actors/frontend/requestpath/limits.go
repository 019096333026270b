package requestpath

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
)

// Limit is one key's rate limits: requests a second and prompt tokens a
// second, each a token bucket with its burst (0: one second's worth).
// A rate of 0 does not limit.
type Limit struct {
	RequestsPerSecond     float64 `json:"requests_per_second"`
	RequestBurst          float64 `json:"request_burst"`
	PromptTokensPerSecond float64 `json:"prompt_tokens_per_second"`
	PromptTokenBurst      float64 `json:"prompt_token_burst"`
}

func (l Limit) validate(name string) error {
	for _, v := range []float64{l.RequestsPerSecond, l.RequestBurst, l.PromptTokensPerSecond, l.PromptTokenBurst} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("rate limit %s: rates and bursts must be finite and not negative", name)
		}
	}
	return nil
}

func (l Limit) on() bool { return l.RequestsPerSecond > 0 || l.PromptTokensPerSecond > 0 }

// Limits are the rate limits per key: Keys names some, Default applies to
// every other key, each with buckets of its own. MaxKeys bounds the keys
// tracked (default 65536): past it, idle keys (full buckets) are
// forgotten, and when none is idle a new key shares one overflow pair of
// buckets with the other newcomers (counted).
type Limits struct {
	Default Limit            `json:"default"`
	Keys    map[string]Limit `json:"keys"`
	MaxKeys int              `json:"-"`
}

func (l Limits) validate() error {
	if err := l.Default.validate("default"); err != nil {
		return err
	}
	for k, v := range l.Keys {
		if err := v.validate(fmt.Sprintf("%q", k)); err != nil {
			return err
		}
	}
	return nil
}

// LoadLimits reads a rate-limits file: JSON {"default": LIMIT, "keys":
// {"KEY": LIMIT, …}}, LIMIT {"requests_per_second", "request_burst",
// "prompt_tokens_per_second", "prompt_token_burst"}; unknown fields are
// errors.
func LoadLimits(path string) (Limits, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Limits{}, err
	}
	var l Limits
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Limits{}, fmt.Errorf("rate limits %s: %w", path, err)
	}
	if err := l.validate(); err != nil {
		return Limits{}, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

type keyBuckets struct{ requests, tokens guard.Bucket }

func newKeyBuckets(l Limit) *keyBuckets {
	return &keyBuckets{requests: guard.NewBucket(l.RequestsPerSecond, l.RequestBurst),
		tokens: guard.NewBucket(l.PromptTokensPerSecond, l.PromptTokenBurst)}
}

// limiter holds the buckets per key; the Guard's lock covers it.
type limiter struct {
	cfg      Limits
	keys     map[string]*keyBuckets
	overflow *keyBuckets
}

func newLimiter(cfg Limits) limiter {
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 1 << 16
	}
	return limiter{cfg: cfg, keys: map[string]*keyBuckets{}, overflow: newKeyBuckets(cfg.Default)}
}

func (l *limiter) buckets(now time.Time, key string, c *guardCounts) *keyBuckets {
	if b, ok := l.keys[key]; ok {
		return b
	}
	lim, named := l.cfg.Keys[key]
	if !named {
		lim = l.cfg.Default
	}
	if !lim.on() {
		return nil
	}
	if len(l.keys) >= l.cfg.MaxKeys {
		for k, b := range l.keys {
			if b.requests.Full(now) && b.tokens.Full(now) {
				delete(l.keys, k)
			}
		}
	}
	if len(l.keys) >= l.cfg.MaxKeys {
		c.limitOverflow++
		return l.overflow
	}
	b := newKeyBuckets(lim)
	l.keys[key] = b
	return b
}

// ErrRateLimited: the request's key is over its rate limit → 429 with
// Retry-After.
var ErrRateLimited = errors.New("rate limited")

// RateLimitError is ErrRateLimited with the wait until the key's buckets
// would pass the request.
type RateLimitError struct {
	Key  string
	Kind string // requests or prompt_tokens: the bucket that refused
	Wait time.Duration
}

// RetryAfter is the wait until the key's buckets would pass the request.
func (e *RateLimitError) RetryAfter() time.Duration { return e.Wait }

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited: key %q is over its %s limit; retry after %v", e.Key, e.Kind, e.Wait.Round(time.Millisecond))
}

// Unwrap makes a RateLimitError an ErrRateLimited.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// RetryAfterer is an error that says when to try again (RateLimitError,
// QueueError): the front ends answer its Retry-After.
type RetryAfterer interface {
	error
	RetryAfter() time.Duration
}

// RetryAfterSeconds is the Retry-After header's value: whole seconds,
// at least 1.
func RetryAfterSeconds(d time.Duration) int { return max(int(math.Ceil(d.Seconds())), 1) }

// limit takes one request of tokens prompt tokens from key's buckets, or
// says which refused and for how long. Both buckets must pass: a request
// refused takes nothing.
func (g *Guard) limit(key string, tokens int) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	b := g.limiter.buckets(now, key, &g.counts)
	if b == nil {
		return nil
	}
	wr, wt := b.requests.Wait(now, 1), b.tokens.Wait(now, float64(tokens))
	if wr == 0 && wt == 0 {
		b.requests.Spend(now, 1)
		b.tokens.Spend(now, float64(tokens))
		return nil
	}
	e := &RateLimitError{Key: key, Kind: "requests", Wait: wr}
	if wt > wr {
		e.Kind, e.Wait = "prompt_tokens", wt
	}
	if g.counts.limited == nil {
		g.counts.limited = map[string]int64{}
	}
	g.counts.limited[e.Kind]++
	return e
}
