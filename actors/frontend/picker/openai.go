package picker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens"
)

// Reasons the picker routes a request by load only, before any tokenizer
// is asked (metrics labels; the tokenizer's own reasons — no_tokenizer,
// no_engine, … — are counted beside them).
const (
	ReasonNoBody      = "no_body"      // the data plane sent no body (none, or its body mode sends none before the headers are answered)
	ReasonOtherPath   = "other_path"   // not /v1/completions nor /v1/chat/completions
	ReasonBatchPrompt = "batch_prompt" // several prompts in one request
	ReasonEmptyPrompt = "empty_prompt" // no prompt tokens
)

// Prompt is what the picker reads from an OpenAI request body: the model
// and the prompt to turn into token ids (Completion or Chat), or the
// Reason it routes by load.
type Prompt struct {
	Model      string
	Completion *prompttokens.Completion
	Chat       *prompttokens.Chat
	Reason     string
}

// ParsePrompt reads the model and the prompt of an OpenAI request sent to
// path (its query string ignored): /v1/completions with a prompt of token
// ids or text, /v1/chat/completions with messages. Any other path, and a
// batch of prompts, route by load with a Reason. A body that is not a JSON
// object with a "model" and the path's prompt is an error wrapping
// ErrInvalid (the client's: 400).
func ParsePrompt(path string, body []byte) (Prompt, error) {
	var b struct {
		Model  string          `json:"model"`
		Prompt json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return Prompt{}, fmt.Errorf("%w: body is not an OpenAI JSON request: %v", ErrInvalid, err)
	}
	if b.Model == "" {
		return Prompt{}, fmt.Errorf("%w: body has no \"model\"", ErrInvalid)
	}
	p := Prompt{Model: b.Model}
	path, _, _ = strings.Cut(path, "?")
	switch path {
	case "/v1/completions":
		raw := bytes.TrimSpace(b.Prompt)
		if ids, ok := tokenIDs(raw); ok {
			p.Completion = &prompttokens.Completion{IDs: ids}
			return p, nil
		}
		c, err := prompttokens.ParseCompletionPrompt(raw)
		switch {
		case err == nil:
			p.Completion = &c
		case isBatch(raw): // checked only when refused: the common prompt pays nothing
			p.Reason = ReasonBatchPrompt
		default:
			return Prompt{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	case "/v1/chat/completions":
		c, err := prompttokens.ParseChat(body)
		if err != nil {
			return Prompt{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		p.Chat = &c
	default:
		p.Reason = ReasonOtherPath
	}
	return p, nil
}

// tokenIDs reads a prompt of token ids, [1,2,3], in one pass (the common
// completions prompt, and the picker's hot path: encoding/json takes three
// passes and a reflective decode per id). ok is false for anything else —
// text, a batch, a number out of range, stray bytes — which goes to the
// general parser, so both read a valid prompt the same way.
func tokenIDs(raw []byte) (ids []uint32, ok bool) {
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return nil, false
	}
	body := raw[1 : len(raw)-1]
	ids = make([]uint32, 0, len(body)/4+1)
	i, n := 0, len(body)
	skip := func() {
		for i < n && (body[i] == ' ' || body[i] == '\n' || body[i] == '\t' || body[i] == '\r') {
			i++
		}
	}
	if skip(); i == n {
		return ids, true
	}
	for {
		start := i
		var v uint64
		for ; i < n && body[i] >= '0' && body[i] <= '9'; i++ {
			if v = v*10 + uint64(body[i]-'0'); v > math.MaxUint32 {
				return nil, false
			}
		}
		if i == start || body[start] == '0' && i-start > 1 { // no digits, or a leading zero
			return nil, false
		}
		ids = append(ids, uint32(v))
		if skip(); i == n {
			return ids, true
		}
		if body[i] != ',' {
			return nil, false
		}
		i++
		skip()
	}
}

// isBatch reports whether a completions prompt holds several prompts (an
// array of two or more strings or id arrays): one engine serves them all,
// so the picker routes by load.
func isBatch(raw []byte) bool {
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil || len(items) < 2 {
		return false
	}
	first := bytes.TrimSpace(items[0])
	return len(first) > 0 && (first[0] == '"' || first[0] == '[')
}

// Tokenizer turns a prompt into the token ids the engine will see
// (prompttokens.Resolver is one). A result from no source carries the
// reason, and the request routes by load.
type Tokenizer interface {
	Completion(ctx context.Context, model string, p prompttokens.Completion) prompttokens.Result
	Chat(ctx context.Context, model string, c prompttokens.Chat) prompttokens.Result
}

// tokens resolves a prompt: its ids, or the reason there are none.
func tokens(ctx context.Context, tk Tokenizer, p Prompt) ([]uint32, string) {
	if p.Reason != "" {
		return nil, p.Reason
	}
	var res prompttokens.Result
	switch {
	case p.Completion != nil && !p.Completion.IsText:
		res = prompttokens.Result{IDs: p.Completion.IDs, Source: prompttokens.FromRequest}
		if tk != nil {
			res = tk.Completion(ctx, p.Model, *p.Completion) // counted by the resolver
		}
	case tk == nil && p.Completion != nil:
		return nil, prompttokens.ReasonNoTokenizer
	case tk == nil:
		return nil, prompttokens.ReasonNoEngine
	case p.Completion != nil:
		res = tk.Completion(ctx, p.Model, *p.Completion)
	default:
		res = tk.Chat(ctx, p.Model, *p.Chat)
	}
	if res.Source == prompttokens.FromNone {
		return nil, res.Reason
	}
	if len(res.IDs) == 0 {
		return nil, ReasonEmptyPrompt
	}
	return res.IDs, ""
}
