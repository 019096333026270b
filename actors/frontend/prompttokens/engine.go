package prompttokens

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Engine is a client of one engine's tokenization endpoints. vLLM and
// SGLang share the /tokenize shapes:
//
//	POST /tokenize {"model", "prompt", "add_special_tokens"}            (completion form)
//	POST /tokenize {"model", "messages", "tools", "chat_template_kwargs",
//	                "add_generation_prompt", "continue_final_message",
//	                "add_special_tokens", "chat_template"}              (chat form)
//	→ {"count": n, "max_model_len": m, "tokens": [ids]}
//
// vLLM, when started with the render endpoints, also answers
//
//	POST /v1/completions/render      {"model", "prompt", ...} → [{"token_ids": [ids], ...}]
//	POST /v1/chat/completions/render {"model", "messages", ...} → {"token_ids": [ids], ...}
//
// which run exactly the preprocessing of /v1/completions and
// /v1/chat/completions. The client tries render first and, on a 404 or
// 405, remembers that this engine has none and uses /tokenize from then on.
type Engine struct {
	base     string
	client   *http.Client
	noRender atomic.Bool
}

// NewEngine returns a client of the engine serving at base (its HTTP
// address, e.g. http://10.0.0.5:8000). A nil client is http.DefaultClient;
// deadlines come from the caller's context.
func NewEngine(base string, client *http.Client) *Engine {
	if client == nil {
		client = http.DefaultClient
	}
	return &Engine{base: strings.TrimRight(base, "/"), client: client}
}

// URL is the engine's base address.
func (e *Engine) URL() string { return e.base }

// errNotFound marks an endpoint the engine does not serve.
var errNotFound = errors.New("endpoint not served")

type tokenizeResponse struct {
	Tokens *[]uint32 `json:"tokens"`
}

type renderResponse struct {
	TokenIDs *[]uint32 `json:"token_ids"`
}

// TokenizeText returns the engine's ids for a completion prompt's text.
func (e *Engine) TokenizeText(ctx context.Context, model, text string, addSpecial bool) ([]uint32, error) {
	body, _ := json.Marshal(struct {
		Model            string `json:"model"`
		Prompt           string `json:"prompt"`
		AddSpecialTokens bool   `json:"add_special_tokens"`
	}{model, text, addSpecial})
	if !e.noRender.Load() {
		var out []renderResponse
		err := e.post(ctx, "/v1/completions/render", body, &out)
		switch {
		case err == nil && len(out) == 1 && out[0].TokenIDs != nil:
			return *out[0].TokenIDs, nil
		case err == nil:
			return nil, fmt.Errorf("/v1/completions/render: want one prompt with token_ids, got %d", len(out))
		case !errors.Is(err, errNotFound):
			return nil, err
		}
		e.noRender.Store(true)
	}
	return e.tokenize(ctx, body)
}

// RenderChat returns the engine's ids for a chat request's prompt, its
// chat template applied by the engine.
func (e *Engine) RenderChat(ctx context.Context, model string, c Chat) ([]uint32, error) {
	body, err := json.Marshal(struct {
		Model string `json:"model"`
		Chat
	}{model, c})
	if err != nil {
		return nil, fmt.Errorf("chat request: %w", err)
	}
	if !e.noRender.Load() {
		var out renderResponse
		err := e.post(ctx, "/v1/chat/completions/render", body, &out)
		switch {
		case err == nil && out.TokenIDs != nil:
			return *out.TokenIDs, nil
		case err == nil:
			return nil, fmt.Errorf("/v1/chat/completions/render: no token_ids")
		case !errors.Is(err, errNotFound):
			return nil, err
		}
		e.noRender.Store(true)
	}
	return e.tokenize(ctx, body)
}

func (e *Engine) tokenize(ctx context.Context, body []byte) ([]uint32, error) {
	var out tokenizeResponse
	if err := e.post(ctx, "/tokenize", body, &out); err != nil {
		return nil, err
	}
	if out.Tokens == nil {
		return nil, fmt.Errorf("/tokenize: no tokens in the answer")
	}
	return *out.Tokens, nil
}

// maxAnswer bounds an engine's answer (4 Mi ids as JSON fit well within).
const maxAnswer = 64 << 20

func (e *Engine) post(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: %s: %w", path, resp.Status, errNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
