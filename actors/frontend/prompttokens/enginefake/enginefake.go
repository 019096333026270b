// Package enginefake is an engine's tokenization surface for tests and
// simulated engines: vLLM's POST /tokenize (completion and chat forms),
// POST /v1/completions/render and POST /v1/chat/completions/render, and
// the block size in GET /metrics (vLLM's cache_config_info, SetBlockSize), with the same
// request and answer JSON as vLLM. It tokenizes with a real tokenizer
// (messages/tokenizer) and renders chat with a ChatML template — the
// shape of Qwen's, not its exact text: what matters to the router is that
// the engine renders and kvrouter does not.
//
// Faults for client tests: Hold keeps requests waiting until released (a
// slow engine, without sleeping), Fail answers every request with a status,
// and NoRender serves /tokenize only (as an engine started without the
// render endpoints, or SGLang). Calls counts requests by path.
package enginefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

// Engine serves the endpoints; configure its fields before serving.
type Engine struct {
	Tokenizer *tokenizer.Tokenizer
	NoRender  bool

	mu        sync.Mutex
	blockSize int
	fail      int
	hold      chan struct{}
	arrived   chan struct{} // closed by the first held request

	calls map[string]int
}

// SetBlockSize sets the block size /metrics reports (0: none).
func (e *Engine) SetBlockSize(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.blockSize = n
}

// Fail makes every request answer status (0: answer normally).
func (e *Engine) Fail(status int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail = status
}

// Hold makes requests wait until release is called (or their client gives
// up); arrived is closed when the first held request comes in.
func (e *Engine) Hold() (arrived <-chan struct{}, release func()) {
	ch, in := make(chan struct{}), make(chan struct{})
	e.mu.Lock()
	e.hold, e.arrived = ch, in
	e.mu.Unlock()
	var once sync.Once
	return in, func() {
		once.Do(func() {
			e.mu.Lock()
			if e.hold == ch {
				e.hold = nil
			}
			e.mu.Unlock()
			close(ch)
		})
	}
}

// Calls returns how many requests reached path.
func (e *Engine) Calls(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[path]
}

// request is the union of the completion and chat request fields.
type request struct {
	Prompt               *string         `json:"prompt"`
	Messages             []Message       `json:"messages"`
	Tools                json.RawMessage `json:"tools"`
	ChatTemplateKwargs   map[string]any  `json:"chat_template_kwargs"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	AddSpecialTokens     *bool           `json:"add_special_tokens"`
}

// Message is one OpenAI chat message (content: a string or text parts).
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ServeHTTP implements http.Handler.
func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	if e.calls == nil {
		e.calls = map[string]int{}
	}
	e.calls[r.URL.Path]++
	fail, hold, blockSize := e.fail, e.hold, e.blockSize
	if hold != nil && e.arrived != nil {
		close(e.arrived)
		e.arrived = nil
	}
	e.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if fail != 0 {
		http.Error(w, `{"error":"injected failure"}`, fail)
		return
	}
	switch {
	case r.URL.Path == "/metrics" && r.Method == http.MethodGet && blockSize > 0:
		fmt.Fprintf(w, "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"%d\",cache_dtype=\"auto\",enable_prefix_caching=\"True\"} 1.0\n", blockSize)
	case r.Method != http.MethodPost:
		http.NotFound(w, r)
	case r.URL.Path == "/tokenize":
		e.answer(w, r, func(ids []uint32) any {
			return map[string]any{"count": len(ids), "max_model_len": 32768, "tokens": ids, "token_strs": nil}
		})
	case r.URL.Path == "/v1/completions/render" && !e.NoRender:
		e.answer(w, r, func(ids []uint32) any {
			return []map[string]any{{"request_id": "render", "token_ids": ids, "sampling_params": map[string]any{}}}
		})
	case r.URL.Path == "/v1/chat/completions/render" && !e.NoRender:
		e.answer(w, r, func(ids []uint32) any { return map[string]any{"request_id": "render", "token_ids": ids} })
	default:
		http.NotFound(w, r)
	}
}

func (e *Engine) answer(w http.ResponseWriter, r *http.Request, shape func([]uint32) any) {
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	ids, err := e.tokenize(&req)
	if err != nil {
		http.Error(w, fmt.Sprintf(`{"error":%q}`, err.Error()), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(shape(ids))
}

// PromptIDs returns the prompt ids an engine would run for a
// /v1/completions or /v1/chat/completions body (or a /tokenize or render
// body): what a simulated engine's OpenAI surface stores in its cache.
func (e *Engine) PromptIDs(body []byte) ([]uint32, error) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	return e.tokenize(&req)
}

// tokenize returns the ids the engine gives a request (completion when
// prompt is set, else chat), with vLLM's defaults: add_special_tokens
// true for a completion, false for chat; add_generation_prompt true.
func (e *Engine) tokenize(req *request) ([]uint32, error) {
	if req.Prompt != nil {
		return e.Tokenizer.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("need prompt or messages")
	}
	text, err := RenderChatML(req.Messages, req.Tools, req.ChatTemplateKwargs, req.AddGenerationPrompt == nil || *req.AddGenerationPrompt)
	if err != nil {
		return nil, err
	}
	return e.Tokenizer.Encode(text, req.AddSpecialTokens != nil && *req.AddSpecialTokens)
}

// RenderChatML renders messages the way Qwen's template shapes them: each
// turn "<|im_start|>role\ncontent<|im_end|>\n"; tools in a system turn
// first; with addGenerationPrompt the assistant's opening, and with
// chat_template_kwargs {"enable_thinking": false} an empty think block.
func RenderChatML(msgs []Message, tools json.RawMessage, kwargs map[string]any, addGenerationPrompt bool) (string, error) {
	var b strings.Builder
	if t := strings.TrimSpace(string(tools)); t != "" && t != "null" {
		b.WriteString("<|im_start|>system\n# Tools\n\n<tools>\n" + t + "\n</tools><|im_end|>\n")
	}
	for _, m := range msgs {
		text, err := contentText(m.Content)
		if err != nil {
			return "", err
		}
		b.WriteString("<|im_start|>" + m.Role + "\n" + text + "<|im_end|>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if v, ok := kwargs["enable_thinking"].(bool); ok && !v {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}

// contentText reads a message's content: a string, or text parts.
func contentText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content: want a string or text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}
