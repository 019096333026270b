package simengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens/enginefake"
)

// The OpenAI HTTP surface of a simulated engine: POST /v1/completions and
// /v1/chat/completions, answered from the engine's prefix cache (the
// request is served by Engine.ServeRequest — the same cache and KV event
// path as the ZeroMQ-driven runs, so kvrouter sees the blocks the request
// stored), then a fixed number of completion tokens, streamed as
// server-sent events when the request asks "stream": true. The prompt's
// token ids are the request's ("prompt" as ids); a text prompt, and chat
// messages, stand in with one token per byte (role and content of each
// message), which no real tokenizer does — unless HTTPOptions.Tokens is
// set: then the prompt is what that tokenizer gives (chat through its
// template), and the surface also answers the engine's tokenization
// endpoints (/tokenize, the render endpoints, the block size on /metrics)
// with the same ids, as a vLLM does. usage.prompt_tokens_details
// .cached_tokens says how much of the prompt the cache held, as vLLM
// reports it.

// HTTPOptions configure an engine's OpenAI surface.
type HTTPOptions struct {
	// Model is the model name the engine answers for (any is accepted;
	// it is echoed). Default "sim".
	Model string
	// CompletionTokens is how many tokens an answer has (default 4; a
	// request's max_tokens lowers it).
	CompletionTokens int
	// TokenInterval is the pause before each streamed token after the
	// first (default 0).
	TokenInterval time.Duration
	// Hold, when set, is called before each streamed token after the first
	// with the request's context; the stream goes on when it returns
	// (tests: hold a stream open to cancel it or kill the engine).
	Hold func(ctx context.Context)
	// Tokens, when set, tokenizes prompts as a real engine (see the
	// comment above) and serves the tokenization endpoints.
	Tokens *enginefake.Engine
	// Metrics, when set, serves GET /metrics in that engine's format
	// (metrics.go: MetricsVLLM, MetricsVLLMOld, MetricsSGLang,
	// MetricsSGLangV2) from the engine's own state, instead of Tokens'
	// block size alone.
	Metrics string
	// MaxRunning bounds the requests running at once; more wait for a
	// slot, and /metrics reports them waiting (0: no bound).
	MaxRunning int
	// Disagg, when set, makes the engine the prefill or the decode half
	// of a disaggregated pair (disagg.go).
	Disagg *DisaggOptions
	// Prefill, when set, models each request's prefill: the first token
	// and the request's KV events wait for its end (prefill.go).
	Prefill *PrefillOptions
}

// HTTPServer is an engine's OpenAI surface listening on loopback.
type HTTPServer struct {
	eng    *Engine
	opts   HTTPOptions
	ln     net.Listener
	srv    *http.Server
	active atomic.Int64
	served atomic.Int64
	load   load
	pre    *prefiller // nil without a prefill model
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

// ServeHTTP starts the engine's OpenAI surface on addr ("127.0.0.1:0"
// picks a free port; see ServingEndpoint).
func (e *Engine) ServeHTTP(addr string, opts HTTPOptions) (*HTTPServer, error) {
	if opts.Model == "" {
		opts.Model = "sim"
	}
	if opts.CompletionTokens <= 0 {
		opts.CompletionTokens = 4
	}
	if opts.Metrics != "" && !slices.Contains(MetricsDialects, opts.Metrics) {
		return nil, fmt.Errorf("simengine: metrics %q, want one of %v", opts.Metrics, MetricsDialects)
	}
	if opts.Disagg != nil {
		if err := opts.Disagg.check(); err != nil {
			return nil, err
		}
	}
	if opts.Prefill != nil {
		if err := opts.Prefill.check(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("simengine: HTTP on %s: %w", addr, err)
	}
	s := &HTTPServer{eng: e, opts: opts, ln: ln, conns: map[net.Conn]bool{}}
	if opts.Prefill != nil {
		s.pre = newPrefiller(e, *opts.Prefill)
	}
	if opts.MaxRunning > 0 {
		s.load.slots = make(chan struct{}, opts.MaxRunning)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", s.complete)
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {}) // 200, empty: vLLM's liveness
	if opts.Tokens != nil {
		for _, p := range []string{"POST /tokenize", "POST /v1/completions/render", "POST /v1/chat/completions/render"} {
			mux.Handle(p, opts.Tokens)
		}
	}
	switch {
	case opts.Metrics != "":
		mux.HandleFunc("GET /metrics", s.metrics)
	case opts.Tokens != nil:
		mux.Handle("GET /metrics", opts.Tokens)
	}
	s.srv = &http.Server{Handler: mux, ConnState: s.track}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// ServingEndpoint is the host:port to register as the rank's
// serving_endpoint.
func (s *HTTPServer) ServingEndpoint() string { return s.ln.Addr().String() }

// Active is the number of requests being answered now.
func (s *HTTPServer) Active() int { return int(s.active.Load()) }

// Served is the number of requests answered (whole or not).
func (s *HTTPServer) Served() int { return int(s.served.Load()) }

// Kill stops the surface at once: the listener and every connection are
// closed, streams in progress end mid-way (an engine that died).
func (s *HTTPServer) Kill() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	_ = s.srv.Close()
	if s.pre != nil {
		s.pre.close()
	}
}

// Close shuts the surface down.
func (s *HTTPServer) Close() error { s.Kill(); return nil }

func (s *HTTPServer) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.conns[c] = true
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	}
}

// openAIRequest is the part of a completions or chat request the engine reads.
type openAIRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	Messages  []chatMessage   `json:"messages"`
	Stream    bool            `json:"stream"`
	MaxTokens int             `json:"max_tokens"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// promptTokens is the request's prompt as token ids (see the file comment).
func (r *openAIRequest) promptTokens(chat bool) ([]uint32, error) {
	if chat {
		if len(r.Messages) == 0 {
			return nil, errors.New("messages: want at least one message")
		}
		var sb strings.Builder
		for _, m := range r.Messages {
			sb.WriteString(m.Role + ": " + m.Content + "\n")
		}
		return byteTokens(sb.String()), nil
	}
	var ids []uint32
	if err := json.Unmarshal(r.Prompt, &ids); err == nil {
		return ids, nil
	}
	var text string
	if err := json.Unmarshal(r.Prompt, &text); err != nil {
		return nil, errors.New("prompt: want a string or an array of token ids")
	}
	return byteTokens(text), nil
}

// isIDs reports whether a completions prompt is given as token ids.
func isIDs(prompt json.RawMessage) bool {
	var ids []uint32
	return json.Unmarshal(prompt, &ids) == nil
}

func byteTokens(s string) []uint32 {
	out := make([]uint32, len(s))
	for i := range len(s) {
		out[i] = uint32(s[i])
	}
	return out
}

func (s *HTTPServer) complete(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)
	defer s.served.Add(1)
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	var req openAIRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		openAIError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	tokens, err := req.promptTokens(chat)
	if err == nil && s.opts.Tokens != nil && (chat || !isIDs(req.Prompt)) {
		tokens, err = s.opts.Tokens.PromptIDs(body)
	}
	if err != nil {
		openAIError(w, http.StatusBadRequest, err.Error())
		return
	}
	var leg *disaggLeg
	if d := s.opts.Disagg; d != nil {
		if leg, tokens, err = d.admit(r.Context(), body, tokens); err != nil {
			if r.Context().Err() == nil {
				openAIError(w, disaggStatus, err.Error())
			}
			return
		}
	}
	bs := s.eng.opts.BlockSize
	blocks := (len(tokens) + bs - 1) / bs
	if !s.load.admit(r.Context(), blocks) {
		return // the client went away while the request waited
	}
	defer s.load.release(blocks)
	cached, prefillEnd, err := s.serve(r.Context(), tokens)
	if err == nil {
		err = leg.served(len(tokens) / bs) // a prefill engine hands its full blocks over
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		openAIError(w, http.StatusInternalServerError, err.Error())
		return
	}
	n := s.opts.CompletionTokens
	if req.MaxTokens > 0 {
		n = min(n, req.MaxTokens)
	}
	cachedTokens := min(cached*bs, len(tokens))
	s.load.prefix(len(tokens), cachedTokens)
	if !waitPrefill(r.Context(), prefillEnd) {
		return // the client went away during the prefill
	}
	ans := answer{chat: chat, model: req.Model, prompt: len(tokens), cached: cachedTokens, completion: n}
	if !req.Stream {
		whole := ans.whole()
		if leg != nil && leg.decorate != nil {
			leg.decorate(whole, len(tokens)/bs)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(whole)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	for i := range n {
		if i > 0 {
			if s.opts.Hold != nil {
				s.opts.Hold(r.Context())
			}
			if s.opts.TokenInterval > 0 {
				select {
				case <-time.After(s.opts.TokenInterval):
				case <-r.Context().Done():
				}
			}
			if r.Context().Err() != nil {
				return
			}
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", mustJSON(ans.chunk(i))); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", mustJSON(ans.usageChunk()))
}

// answer shapes the OpenAI response objects of one request.
type answer struct {
	chat                       bool
	model                      string
	prompt, cached, completion int
}

func (a answer) object(streamed bool) string {
	switch {
	case a.chat && streamed:
		return "chat.completion.chunk"
	case a.chat:
		return "chat.completion"
	}
	return "text_completion"
}

func (a answer) usage() map[string]any {
	return map[string]any{"prompt_tokens": a.prompt, "completion_tokens": a.completion, "total_tokens": a.prompt + a.completion,
		"prompt_tokens_details": map[string]any{"cached_tokens": a.cached}}
}

func (a answer) choice(text string, final bool) map[string]any {
	c := map[string]any{"index": 0, "finish_reason": nil}
	if final {
		c["finish_reason"] = "length"
	}
	if a.chat {
		c["delta"] = map[string]any{"role": "assistant", "content": text}
	} else {
		c["text"] = text
	}
	return c
}

func (a answer) whole() map[string]any {
	text := strings.Repeat(" tok", a.completion)
	c := a.choice(text, true)
	if a.chat {
		delete(c, "delta")
		c["message"] = map[string]any{"role": "assistant", "content": text}
	}
	return map[string]any{"id": "sim", "object": a.object(false), "model": a.model, "choices": []any{c}, "usage": a.usage()}
}

func (a answer) chunk(i int) map[string]any {
	return map[string]any{"id": "sim", "object": a.object(true), "model": a.model,
		"choices": []any{a.choice(" tok", i == a.completion-1)}}
}

func (a answer) usageChunk() map[string]any {
	return map[string]any{"id": "sim", "object": a.object(true), "model": a.model, "choices": []any{}, "usage": a.usage()}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func openAIError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": status}})
}
