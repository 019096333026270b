package prompttokens

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Source says where a prompt's token ids came from.
type Source string

const (
	// FromRequest: the request carried token ids (an OpenAI completions
	// prompt given as ids).
	FromRequest Source = "request"
	// FromLocal: kvrouter's own tokenizer for the model (--tokenizer).
	FromLocal Source = "local"
	// FromEngine: the engine's /tokenize or render endpoint (or the cache
	// of its earlier answers).
	FromEngine Source = "engine"
	// FromNone: no ids; the caller routes by load. Result.Reason says why.
	FromNone Source = "none"
)

// Completion is an OpenAI /v1/completions prompt: text or token ids.
type Completion struct {
	Text   string
	IDs    []uint32
	IsText bool
	// AddSpecialTokens: whether the engine adds the tokenizer's special
	// tokens (BOS) to a text prompt; vLLM's default is true.
	AddSpecialTokens bool
}

// ParseCompletionPrompt reads the "prompt" field of a completions request:
// a string or an array of token ids. A batch (an array of strings or of id
// arrays) is refused: one request routes as one prompt.
func ParseCompletionPrompt(raw json.RawMessage) (Completion, error) {
	raw = bytes.TrimSpace(raw)
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return Completion{Text: text, IsText: true, AddSpecialTokens: true}, nil
	}
	var ids []uint32
	if err := json.Unmarshal(raw, &ids); err == nil {
		return Completion{IDs: ids}, nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(raw, &batch); err == nil && len(batch) == 1 {
		return ParseCompletionPrompt(batch[0])
	}
	return Completion{}, fmt.Errorf("prompt: want a string or an array of token ids (one prompt, not a batch)")
}

// Chat is what an engine needs to render a /v1/chat/completions request
// into the prompt's token ids: the messages and everything the chat
// template reads. The fields are passed to the engine verbatim.
type Chat struct {
	Messages             json.RawMessage `json:"messages"`
	Tools                json.RawMessage `json:"tools,omitempty"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs,omitempty"`
	ChatTemplate         *string         `json:"chat_template,omitempty"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt,omitempty"`
	ContinueFinalMessage *bool           `json:"continue_final_message,omitempty"`
	AddSpecialTokens     *bool           `json:"add_special_tokens,omitempty"`
}

// ParseChat takes the template inputs from a /v1/chat/completions body.
func ParseChat(body []byte) (Chat, error) {
	var c Chat
	if err := json.Unmarshal(body, &c); err != nil {
		return Chat{}, fmt.Errorf("chat request: %w", err)
	}
	if len(bytes.TrimSpace(c.Messages)) == 0 || string(bytes.TrimSpace(c.Messages)) == "null" {
		return Chat{}, fmt.Errorf("chat request: no messages")
	}
	return c, nil
}

// Result is a prompt's token ids and where they came from.
type Result struct {
	IDs    []uint32
	Source Source
	// Cached: an engine answer served from the cache (no round trip).
	Cached bool
	// Reason, for FromNone: why there are no ids (no engine, engine
	// timeout, engine error, ...), also a metric label.
	Reason string
}
