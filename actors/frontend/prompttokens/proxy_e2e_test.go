package prompttokens_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/proxy"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
)

// chatAnswer is the part of a /v1/chat/completions answer read here.
type chatAnswer struct {
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// TestMultiTurnChatThroughTheProxy: a client talks to kvrouter's OpenAI
// proxy only. Turn 1 is rendered by an engine, routed and served; turn 2
// of the same conversation goes to the worker that served turn 1, whose
// own cache then holds every complete block of turn 1's prompt (the
// engine says so in usage.prompt_tokens_details.cached_tokens).
func TestMultiTurnChatThroughTheProxy(t *testing.T) {
	c := newCluster(t)
	p, err := proxy.New(requestpath.New(c.svc, requestpath.Config{}), proxy.Options{Prompts: c.resolver})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	ctx := context.Background()
	system := msg("system", strings.Repeat("You answer questions about KV-cache-aware routing, briefly and exactly. ", 6))
	q1 := msg("user", "What does the router index?")

	post := func(messages ...string) (chatAnswer, int) {
		t.Helper()
		served := []int{c.https[0].Served(), c.https[1].Served()}
		body := `{"model":"qwen3","max_tokens":3,"messages":[` + strings.Join(messages, ",") + `]}`
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		var a chatAnswer
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		for i := range served {
			if c.https[i].Served() > served[i] {
				return a, i + 1
			}
		}
		t.Fatalf("no engine served the request")
		return a, 0
	}

	a1, w1 := post(system, q1)
	r1 := c.resolver.Chat(ctx, "qwen3", chat(t, system, q1))
	if a1.Usage.PromptTokens != len(r1.IDs) || !r1.Cached {
		t.Fatalf("turn 1: the engine ran %d prompt tokens; the resolver's ids (%d, cached %v) should be the same", a1.Usage.PromptTokens, len(r1.IDs), r1.Cached)
	}
	c.held(t, w1, r1.IDs)
	// The other worker holds something unrelated: overlap decides, not
	// emptiness.
	c.serve(t, 3-w1, c.resolver.Chat(ctx, "qwen3", chat(t, msg("user", strings.Repeat("Something else entirely. ", 12)))).IDs)

	a2, w2 := post(system, q1, msg("assistant", "Which worker holds which KV blocks."), msg("user", "And how does it choose?"))
	r2 := c.resolver.Chat(ctx, "qwen3", chat(t, system, q1, msg("assistant", "Which worker holds which KV blocks."), msg("user", "And how does it choose?")))
	if !slices.Equal(r2.IDs[:len(r1.IDs)], r1.IDs) {
		t.Fatal("turn 2's prompt does not extend turn 1's")
	}
	if want := len(r1.IDs) / blockSize * blockSize; w2 != w1 || a2.Usage.PromptTokensDetails.CachedTokens < want {
		t.Fatalf("turn 2 went to worker %d with %d cached prompt tokens; want worker %d with at least %d", w2, a2.Usage.PromptTokensDetails.CachedTokens, w1, want)
	}
}
