package prompttokens

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens/enginefake"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

func fakeEngine(t *testing.T, configure func(*enginefake.Engine)) (*enginefake.Engine, string) {
	t.Helper()
	e := &enginefake.Engine{Tokenizer: qwen3(t)}
	if configure != nil {
		configure(e)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return e, srv.URL
}

const conversation = `[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":[{"type":"text","text":"Explain KV caches"}]}]`

// wantChat is what the engine renders the conversation to, computed here
// from the same template and tokenizer.
func wantChat(t *testing.T, tools string, kwargs map[string]any) []uint32 {
	t.Helper()
	var msgs []enginefake.Message
	if err := json.Unmarshal([]byte(conversation), &msgs); err != nil {
		t.Fatal(err)
	}
	text, err := enginefake.RenderChatML(msgs, json.RawMessage(tools), kwargs, true)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := qwen3(t).Encode(text, false)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func chatOf(t *testing.T, body string) Chat {
	t.Helper()
	c, err := ParseChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChatRenderedByEngineAndCached(t *testing.T) {
	fake, url := fakeEngine(t, nil)
	r := New(Options{Engines: func(string) []string { return []string{url} }})
	ctx := context.Background()
	c := chatOf(t, `{"model":"qwen3","messages":`+conversation+`}`)
	res := r.Chat(ctx, "qwen3", c)
	if res.Source != FromEngine || res.Cached || !slices.Equal(res.IDs, wantChat(t, "", nil)) {
		t.Fatalf("first: %+v", res)
	}
	if res2 := r.Chat(ctx, "qwen3", c); !res2.Cached || !slices.Equal(res2.IDs, res.IDs) {
		t.Fatalf("second: %+v", res2)
	}
	if n := fake.Calls("/v1/chat/completions/render"); n != 1 {
		t.Fatalf("render calls %d, want 1 (the second answer is cached)", n)
	}
	// A hit allocates nothing (bench/README.md: BenchmarkEngineCacheHit).
	if n := testing.AllocsPerRun(100, func() { r.Chat(ctx, "qwen3", c) }); n != 0 {
		t.Errorf("a cache hit allocates %v times, want 0", n)
	}
	// Tools and template arguments change the prompt, so they are part of
	// the key and reach the engine.
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{}}}]`
	withTools := r.Chat(ctx, "qwen3", chatOf(t, `{"messages":`+conversation+`,"tools":`+tools+`,"chat_template_kwargs":{"enable_thinking":false}}`))
	if withTools.Cached || !slices.Equal(withTools.IDs, wantChat(t, tools, map[string]any{"enable_thinking": false})) {
		t.Fatalf("tools: %+v", withTools)
	}
	if slices.Equal(withTools.IDs, res.IDs) {
		t.Fatal("tools and kwargs made no difference")
	}
}

func TestNoRenderFallsBackToTokenizeOnce(t *testing.T) {
	fake, url := fakeEngine(t, func(e *enginefake.Engine) { e.NoRender = true })
	r := New(Options{Engines: func(string) []string { return []string{url} }})
	ctx := context.Background()
	for i, body := range []string{`{"messages":` + conversation + `}`, `{"messages":[{"role":"user","content":"other"}]}`} {
		if res := r.Chat(ctx, "qwen3", chatOf(t, body)); res.Source != FromEngine {
			t.Fatalf("chat %d: %+v", i, res)
		}
	}
	if res := r.Chat(ctx, "qwen3", chatOf(t, `{"messages":`+conversation+`}`)); !slices.Equal(res.IDs, wantChat(t, "", nil)) {
		t.Fatalf("tokenize chat form: %+v", res)
	}
	res := r.Completion(ctx, "qwen3", Completion{Text: "Hello world", IsText: true, AddSpecialTokens: true})
	if res.Source != FromEngine || !slices.Equal(res.IDs, []uint32{9707, 1879}) {
		t.Fatalf("completion via /tokenize: %+v", res)
	}
	if a, b := fake.Calls("/v1/chat/completions/render"), fake.Calls("/tokenize"); a != 1 || b != 3 {
		t.Fatalf("render calls %d (want 1: then remembered absent), tokenize calls %d (want 3)", a, b)
	}
}

func TestSlowEngineRoutesByLoad(t *testing.T) {
	fake, url := fakeEngine(t, nil)
	_, release := fake.Hold()
	defer release()
	r := New(Options{Engines: func(string) []string { return []string{url} }, Timeout: 50 * time.Millisecond})
	res := r.Chat(context.Background(), "qwen3", chatOf(t, `{"messages":`+conversation+`}`))
	if res.Source != FromNone || res.Reason != ReasonTimeout {
		t.Fatalf("held engine: %+v", res)
	}
	var sb strings.Builder
	_ = r.WriteMetrics(&sb)
	if !strings.Contains(sb.String(), `kvrouter_prompt_tokens_total{source="none",reason="engine_timeout"} 1`) {
		t.Fatalf("timeout not counted:\n%s", sb.String())
	}
}

func TestFailingEngineIsSkipped(t *testing.T) {
	bad, badURL := fakeEngine(t, nil)
	bad.Fail(http.StatusInternalServerError)
	_, goodURL := fakeEngine(t, nil)
	only := New(Options{Engines: func(string) []string { return []string{badURL} }})
	if res := only.Chat(context.Background(), "qwen3", chatOf(t, `{"messages":`+conversation+`}`)); res.Source != FromNone || res.Reason != ReasonEngineError {
		t.Fatalf("failing engine: %+v", res)
	}
	both := New(Options{Engines: func(string) []string { return []string{badURL, goodURL} }})
	for i := range 4 { // whichever engine the rotation asks first
		if res := both.Chat(context.Background(), "qwen3", chatOf(t, `{"messages":[{"role":"user","content":"q`+string(rune('a'+i))+`"}]}`)); res.Source != FromEngine {
			t.Fatalf("request %d with one good engine: %+v", i, res)
		}
	}
}

func TestCompletionPrefersLocalUnlessEngineWins(t *testing.T) {
	fake, url := fakeEngine(t, nil)
	r := New(Options{Engines: func(string) []string { return []string{url} }})
	r.SetTokenizer("qwen3", qwen3(t))
	ctx := context.Background()
	p := Completion{Text: "Hello world", IsText: true, AddSpecialTokens: true}
	if res := r.Completion(ctx, "qwen3", p); res.Source != FromLocal {
		t.Fatalf("local: %+v", res)
	}
	if fake.Calls("/v1/completions/render")+fake.Calls("/tokenize") != 0 {
		t.Fatal("the local path asked the engine")
	}
	r.setEngineWins("qwen3", true)
	if res := r.Completion(ctx, "qwen3", p); res.Source != FromEngine || !slices.Equal(res.IDs, []uint32{9707, 1879}) {
		t.Fatalf("engine wins: %+v", res)
	}
}

func TestCacheIsBoundedLRU(t *testing.T) {
	c := newIDCache(3 * entrySize(make([]uint32, 10)))
	key := func(i int) cacheKey { return hashKey([]byte{byte(i)}) }
	for i := range 3 {
		c.put(key(i), make([]uint32, 10))
	}
	if _, ok := c.get(key(0)); !ok { // 0 becomes the most recent
		t.Fatal("entry 0 missing")
	}
	c.put(key(3), make([]uint32, 10))
	if _, ok := c.get(key(1)); ok {
		t.Fatal("least recently used entry 1 was kept")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := c.get(key(i)); !ok {
			t.Fatalf("entry %d evicted", i)
		}
	}
	if c.bytes() > c.max {
		t.Fatalf("cache holds %d bytes, bound %d", c.bytes(), c.max)
	}
	c.put(key(9), make([]uint32, 1000)) // larger than the whole cache
	if _, ok := c.get(key(9)); ok {
		t.Fatal("an entry larger than the bound was kept")
	}
}

// TestResolutionIsTraced: a resolution's span records its source, and the
// engine round trip is a client span under it whose traceparent reaches
// the engine.
func TestResolutionIsTraced(t *testing.T) {
	exp := spantest.Install(t, nil)
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{}) // as telemetry.StartTracing does
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	var traceparent string
	fake := &enginefake.Engine{Tokenizer: qwen3(t)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent = r.Header.Get("Traceparent")
		fake.ServeHTTP(w, r)
	}))
	defer srv.Close()
	r := New(Options{Engines: func(string) []string { return []string{srv.URL} }})
	if res := r.Chat(context.Background(), "qwen3", chatOf(t, `{"messages":`+conversation+`}`)); res.Source != FromEngine {
		t.Fatalf("%+v", res)
	}
	spans := spantest.ByName(exp, SpanChat)
	if len(spans) != 1 {
		t.Fatalf("%d %s spans", len(spans), SpanChat)
	}
	var source string
	for _, a := range spans[0].Attributes {
		if a.Key == "source" {
			source = a.Value.AsString()
		}
	}
	if source != "engine" || !strings.Contains(traceparent, spans[0].SpanContext.TraceID().String()) {
		t.Fatalf("source %q, traceparent %q, trace %s", source, traceparent, spans[0].SpanContext.TraceID())
	}
}

// TestConcurrentMissesShareOneRoundTrip: a burst of one prompt asks the
// engine once.
func TestConcurrentMissesShareOneRoundTrip(t *testing.T) {
	fake, url := fakeEngine(t, nil)
	arrived, release := fake.Hold()
	r := New(Options{Engines: func(string) []string { return []string{url} }, Timeout: 30 * time.Second})
	c := chatOf(t, `{"messages":`+conversation+`}`)
	results := make(chan Result, 8)
	for range 8 {
		go func() { results <- r.Chat(context.Background(), "qwen3", c) }()
	}
	// Release once the first request has reached the engine; the others
	// are waiting on it (or on the cache, if they arrive later).
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("no request reached the engine")
	}
	release()
	for range 8 {
		if res := <-results; res.Source != FromEngine || !slices.Equal(res.IDs, wantChat(t, "", nil)) {
			t.Fatalf("%+v", res)
		}
	}
	if n := fake.Calls("/v1/chat/completions/render"); n != 1 {
		t.Fatalf("the engine was asked %d times", n)
	}
}

// TestPromptIDsMatchTheEndpoints: what a simulated engine runs for a
// completions or chat body is what its tokenize endpoints answered.
func TestPromptIDsMatchTheEndpoints(t *testing.T) {
	fake, url := fakeEngine(t, nil)
	r := New(Options{Engines: func(string) []string { return []string{url} }})
	ctx := context.Background()
	body := `{"model":"qwen3","messages":` + conversation + `,"max_tokens":5}`
	got, err := fake.PromptIDs([]byte(body))
	if res := r.Chat(ctx, "qwen3", chatOf(t, body)); err != nil || !slices.Equal(got, res.IDs) {
		t.Fatalf("chat: %v %v vs %v", err, got, res.IDs)
	}
	got, err = fake.PromptIDs([]byte(`{"model":"qwen3","prompt":"Hello world"}`))
	if err != nil || !slices.Equal(got, []uint32{9707, 1879}) {
		t.Fatalf("completion: %v %v", err, got)
	}
}
