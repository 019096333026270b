package prompttokens

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/messages/tokenizer"
	"golang.org/x/sync/singleflight"
)

// Options configure a Resolver.
type Options struct {
	// Engines lists the HTTP base addresses of the engines serving a
	// model (nil: none). Asked at each resolution; the first that answers
	// within the deadline is used, starting from a rotating position.
	Engines func(model string) []string
	// Timeout bounds one resolution's engine round trips (default
	// DefaultTimeout): past it the prompt resolves to FromNone and routes
	// by load.
	Timeout time.Duration
	// CacheBytes bounds the cache of engine answers (default
	// DefaultCacheBytes).
	CacheBytes int
	// Client is the HTTP client for engines (nil: the default one, traced
	// when a TracerProvider is installed).
	Client *http.Client
}

// Defaults of Options.
const (
	DefaultTimeout    = 200 * time.Millisecond
	DefaultCacheBytes = 64 << 20
)

// Resolver gives the front ends a prompt's token ids. It is safe for
// concurrent use.
type Resolver struct {
	opts    Options
	cache   *idCache
	stats   Stats
	next    atomic.Uint32 // rotates the first engine asked
	mu      sync.RWMutex
	models  map[string]*modelState
	engines map[string]*Engine // by base address: remembers what each serves
	flights singleflight.Group // engine round trips in progress, by cache key
}

type modelState struct {
	local *tokenizer.Tokenizer // nil: none configured
	// engineWins: the parity guard saw the local tokenizer disagree with
	// the engine, so text goes to the engine.
	engineWins bool
}

// New returns a Resolver.
func New(opts Options) *Resolver {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.Client == nil {
		opts.Client = engineClient()
	}
	return &Resolver{
		opts:    opts,
		cache:   newIDCache(opts.CacheBytes),
		models:  map[string]*modelState{},
		engines: map[string]*Engine{},
	}
}

// SetTokenizer configures the local tokenizer of a model (nil removes it).
func (r *Resolver) SetTokenizer(model string, t *tokenizer.Tokenizer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.models[model]
	if m == nil {
		m = &modelState{}
		r.models[model] = m
	}
	m.local = t
}

// Tokenizer returns the model's local tokenizer, or nil.
func (r *Resolver) Tokenizer(model string) *tokenizer.Tokenizer {
	local, _ := r.state(model)
	return local
}

func (r *Resolver) state(model string) (local *tokenizer.Tokenizer, engineWins bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if m := r.models[model]; m != nil {
		return m.local, m.engineWins
	}
	return nil, false
}

func (r *Resolver) setEngineWins(model string, wins bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.models[model]; m != nil {
		m.engineWins = wins
	}
}

// Engines returns the base addresses the resolver asks for model.
func (r *Resolver) Engines(model string) []string {
	if r.opts.Engines == nil {
		return nil
	}
	return r.opts.Engines(model)
}

// enginesFor returns the clients of the model's engines, rotated.
func (r *Resolver) enginesFor(model string) []*Engine {
	urls := r.Engines(model)
	if len(urls) == 0 {
		return nil
	}
	out := make([]*Engine, len(urls))
	start := int(r.next.Add(1)) % len(urls)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range urls {
		u := urls[(start+i)%len(urls)]
		e := r.engines[u]
		if e == nil {
			e = NewEngine(u, r.opts.Client)
			r.engines[u] = e
		}
		out[i] = e
	}
	return out
}

// Completion resolves an OpenAI completions prompt: ids given are used as
// they are; text goes through the model's local tokenizer, or the engine
// when there is none or the parity guard found it disagreeing.
func (r *Resolver) Completion(ctx context.Context, model string, p Completion) Result {
	if !p.IsText {
		return r.done(Result{IDs: p.IDs, Source: FromRequest})
	}
	ctx, end := traced(ctx, SpanCompletion, model)
	res := r.completionText(ctx, model, p)
	end(res)
	return res
}

func (r *Resolver) completionText(ctx context.Context, model string, p Completion) Result {
	local, engineWins := r.state(model)
	if local != nil && !engineWins {
		if ids, err := local.Encode(p.Text, p.AddSpecialTokens); err == nil {
			return r.done(Result{IDs: ids, Source: FromLocal})
		}
	}
	special := []byte{0}
	if p.AddSpecialTokens {
		special[0] = 1
	}
	key := hashKey([]byte("completion"), []byte(model), []byte(p.Text), special)
	res, hit := r.cached(key)
	if !hit {
		res = r.fromEngine(ctx, model, key, func(ctx context.Context, e *Engine) ([]uint32, error) {
			return e.TokenizeText(ctx, model, p.Text, p.AddSpecialTokens)
		})
	}
	if res.Source == FromNone && res.Reason == ReasonNoEngine {
		res.Reason = ReasonNoTokenizer
	}
	return r.done(res)
}

// Chat resolves a chat request's prompt. Chat prompts are rendered by the
// engine (its template, tools, chat_template_kwargs), never guessed.
func (r *Resolver) Chat(ctx context.Context, model string, c Chat) Result {
	ctx, end := traced(ctx, SpanChat, model)
	key := hashKey([]byte("chat"), []byte(model), c.Messages, c.Tools, c.ChatTemplateKwargs,
		optString(c.ChatTemplate), flags(c.AddGenerationPrompt, c.ContinueFinalMessage, c.AddSpecialTokens))
	res, hit := r.cached(key)
	if !hit { // the closure (it escapes) is made on a miss only: a hit allocates nothing
		res = r.fromEngine(ctx, model, key, func(ctx context.Context, e *Engine) ([]uint32, error) {
			return e.RenderChat(ctx, model, c)
		})
	}
	res = r.done(res)
	end(res)
	return res
}

// cached answers from the cache of engine answers.
func (r *Resolver) cached(key cacheKey) (Result, bool) {
	ids, ok := r.cache.get(key)
	return Result{IDs: ids, Source: FromEngine, Cached: true}, ok
}

// fromEngine asks the model's engines in turn (after a cache miss) until
// one answers or the deadline passes. Concurrent misses on one key share
// one round trip (a burst of the same prompt asks the engine once); each
// caller still waits no longer than its own deadline.
func (r *Resolver) fromEngine(ctx context.Context, model string, key cacheKey, ask func(context.Context, *Engine) ([]uint32, error)) Result {
	engines := r.enginesFor(model)
	if len(engines) == 0 {
		return Result{Source: FromNone, Reason: ReasonNoEngine}
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	k := key.Bytes()
	flight := r.flights.DoChan(string(k[:]), func() (any, error) {
		// Detached from the first caller's cancellation (others share the
		// answer), bounded by the same deadline; trace values kept.
		// A flight that ended between this caller's miss and here has
		// filled the cache: answer from it rather than ask again.
		if ids, ok := r.cache.get(key); ok {
			return Result{IDs: ids, Source: FromEngine, Cached: true}, nil
		}
		shared, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
		defer cancel()
		res := Result{Source: FromNone, Reason: ReasonEngineError}
		for _, e := range engines {
			ids, err := ask(shared, e)
			if err == nil {
				r.cache.put(key, ids)
				return Result{IDs: ids, Source: FromEngine}, nil
			}
			if shared.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				res.Reason = ReasonTimeout
				break
			}
		}
		return res, nil
	})
	select {
	case out := <-flight:
		return out.Val.(Result)
	case <-ctx.Done():
		return Result{Source: FromNone, Reason: ReasonTimeout}
	}
}

func optString(s *string) []byte {
	if s == nil {
		return nil
	}
	return append([]byte{1}, *s...)
}

// flags encodes optional booleans as unset (0), false (1) or true (2).
func flags(bs ...*bool) []byte {
	out := make([]byte, len(bs))
	for i, b := range bs {
		switch {
		case b == nil:
		case *b:
			out[i] = 2
		default:
			out[i] = 1
		}
	}
	return out
}

func (r *Resolver) done(res Result) Result {
	r.stats.count(res)
	return res
}
