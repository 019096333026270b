package picker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Reason says why a request was routed by load only (a metrics label).
type Reason uint8

// Load-only reasons.
const (
	ReasonNone           Reason = iota
	ReasonNoBody                // the data plane sent no body (end of stream on the headers, or its body mode sends none before the headers are answered)
	ReasonOtherPath             // not /v1/completions nor /v1/chat/completions
	ReasonTextPrompt            // a text prompt and no tokenizer
	ReasonChat                  // chat messages and no tokenizer
	ReasonTokenizerError        // the tokenizer refused the text
	ReasonBatchPrompt           // several prompts in one request
	ReasonEmptyPrompt           // no prompt tokens
)

var reasonNames = [...]string{"", "no_body", "other_path", "text_prompt", "chat", "tokenizer_error", "batch_prompt", "empty_prompt"}

// String returns the reason's label.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "invalid"
}

// Prompt is what the picker reads from an OpenAI request body.
type Prompt struct {
	Model string
	// Tokens are the prompt's token ids (nil: route by load, for Reason).
	Tokens []uint32
	Reason Reason
}

// openAIBody holds the fields the picker reads; the rest of the body is
// forwarded untouched and never decoded.
type openAIBody struct {
	Model    string          `json:"model"`
	Prompt   json.RawMessage `json:"prompt"`
	Messages json.RawMessage `json:"messages"`
}

// ParsePrompt reads the model and the prompt of an OpenAI request sent to
// path (its query string ignored): /v1/completions with a prompt of token
// ids or text, /v1/chat/completions with messages. Text needs tk (nil: none
// yet); without it, or for any other path, the prompt routes by load with
// a Reason. A body that is not a JSON object with a "model" is an error
// (the client's: 400).
func ParsePrompt(path string, body []byte, tk Tokenizer) (Prompt, error) {
	var b openAIBody
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return Prompt{}, fmt.Errorf("%w: body is not an OpenAI JSON request: %v", ErrInvalid, err)
	}
	if b.Model == "" {
		return Prompt{}, fmt.Errorf("%w: body has no \"model\"", ErrInvalid)
	}
	p := Prompt{Model: b.Model}
	path, _, _ = strings.Cut(path, "?")
	switch path {
	case "/v1/completions":
		return completion(p, b.Prompt, tk)
	case "/v1/chat/completions":
		if len(b.Messages) == 0 || string(b.Messages) == "null" {
			return Prompt{}, fmt.Errorf("%w: chat request has no \"messages\"", ErrInvalid)
		}
		if tk == nil {
			p.Reason = ReasonChat
			return p, nil
		}
		return tokenized(p, func() ([]uint32, error) { return tk.Chat(b.Model, b.Messages) })
	}
	p.Reason = ReasonOtherPath
	return p, nil
}

// completion reads a /v1/completions prompt: a string, token ids, or a
// batch of either (routed by load: one engine serves them all).
func completion(p Prompt, raw json.RawMessage, tk Tokenizer) (Prompt, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Prompt{}, fmt.Errorf("%w: completion request has no \"prompt\"", ErrInvalid)
	}
	switch raw[0] {
	case '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return Prompt{}, fmt.Errorf("%w: prompt: %v", ErrInvalid, err)
		}
		if tk == nil {
			p.Reason = ReasonTextPrompt
			return p, nil
		}
		return tokenized(p, func() ([]uint32, error) { return tk.Completion(p.Model, text) })
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return Prompt{}, fmt.Errorf("%w: prompt: %v", ErrInvalid, err)
		}
		if len(items) == 0 {
			p.Reason = ReasonEmptyPrompt
			return p, nil
		}
		if c := bytes.TrimSpace(items[0]); len(c) > 0 && (c[0] == '"' || c[0] == '[') {
			p.Reason = ReasonBatchPrompt
			return p, nil
		}
		toks, err := tokenIDs(items)
		if err != nil {
			return Prompt{}, err
		}
		p.Tokens = toks
		return p, nil
	}
	return Prompt{}, fmt.Errorf("%w: prompt is neither text nor token ids", ErrInvalid)
}

// tokenIDs reads a prompt of token ids: integers in the uint32 range.
func tokenIDs(items []json.RawMessage) ([]uint32, error) {
	out := make([]uint32, len(items))
	for i, it := range items {
		var f float64
		if err := json.Unmarshal(it, &f); err != nil || f < 0 || f > math.MaxUint32 || f != math.Trunc(f) {
			return nil, fmt.Errorf("%w: prompt token %d (%s) is not a token id", ErrInvalid, i, it)
		}
		out[i] = uint32(f)
	}
	return out, nil
}

// tokenized runs the tokenizer; a refusal routes by load.
func tokenized(p Prompt, run func() ([]uint32, error)) (Prompt, error) {
	toks, err := run()
	switch {
	case err != nil:
		p.Reason = ReasonTokenizerError
	case len(toks) == 0:
		p.Reason = ReasonEmptyPrompt
	default:
		p.Tokens = toks
	}
	return p, nil
}
