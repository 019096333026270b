package prompttokens

import (
	"context"
	"sync"

	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

// Resolver gives the front ends a prompt's token ids. It is safe for
// concurrent use.
type Resolver struct {
	mu     sync.RWMutex
	models map[string]*modelState
	stats  Stats
}

type modelState struct {
	local *tokenizer.Tokenizer // nil: none configured
}

// New returns a Resolver with no models configured: every text prompt
// resolves to FromNone until tokenizers are added.
func New() *Resolver {
	return &Resolver{models: map[string]*modelState{}}
}

// SetTokenizer configures the local tokenizer of a model (nil removes it).
func (r *Resolver) SetTokenizer(model string, t *tokenizer.Tokenizer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.model(model).local = t
}

// model returns the model's state, creating it; r.mu must be held.
func (r *Resolver) model(name string) *modelState {
	m := r.models[name]
	if m == nil {
		m = &modelState{}
		r.models[name] = m
	}
	return m
}

func (r *Resolver) lookup(name string) *modelState {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.models[name]
}

// Completion resolves an OpenAI completions prompt: ids given are used as
// they are; text goes through the model's local tokenizer.
func (r *Resolver) Completion(ctx context.Context, model string, p Completion) Result {
	if !p.IsText {
		return r.done(Result{IDs: p.IDs, Source: FromRequest})
	}
	m := r.lookup(model)
	if m != nil && m.local != nil {
		ids, err := m.local.Encode(p.Text, p.AddSpecialTokens)
		if err == nil {
			return r.done(Result{IDs: ids, Source: FromLocal})
		}
	}
	return r.done(Result{Source: FromNone, Reason: ReasonNoTokenizer})
}

// Chat resolves a chat request's prompt. Chat prompts are rendered by the
// engine (its template, tools, chat_template_kwargs), never guessed.
func (r *Resolver) Chat(ctx context.Context, model string, c Chat) Result {
	return r.done(Result{Source: FromNone, Reason: ReasonNoEngine})
}

func (r *Resolver) done(res Result) Result {
	r.stats.count(res)
	return res
}
