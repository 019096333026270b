package prompttokens_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens"
	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens/enginefake"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

// cluster is kvrouter's service over two simulated engines. Each engine
// caches the blocks of what it serves and publishes them as KV events
// (simengine), and its OpenAI surface — registered as the rank's serving
// endpoint — tokenizes with Qwen3's tokenizer and renders chat with its
// template (enginefake), for its /v1/chat/completions as for /tokenize.
type cluster struct {
	svc      *service.Service
	engines  []*simengine.Engine
	https    []*simengine.HTTPServer
	resolver *prompttokens.Resolver
}

const blockSize = 16

func newCluster(t *testing.T) *cluster {
	tk, err := tokenizer.Load("../../../messages/tokenizer/testdata/qwen3.tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: blockSize, Timeout: 2 * time.Second, Routing: routing.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	c := &cluster{svc: svc}
	var dir prompttokens.Directory
	var targets []prompttokens.Target
	for i := range 2 {
		e, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: blockSize, CapacityBlocks: 1 << 12})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		hs, err := e.ServeHTTP("127.0.0.1:0", simengine.HTTPOptions{CompletionTokens: 3, Tokens: &enginefake.Engine{Tokenizer: tk}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hs.Close() })
		c.engines, c.https = append(c.engines, e), append(c.https, hs)
		serving := hs.ServingEndpoint()
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: e.Endpoint(),
			ReplayEndpoint: e.ReplayEndpoint(), ServingEndpoint: serving, ModelName: "qwen3", BlockSize: blockSize}); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, prompttokens.Target{Model: "qwen3", URL: serving, BlockSize: blockSize})
	}
	dir.Set(targets)
	// Every stream followed up to its last batch before anything is served
	// (a batch published before the listener subscribed would be missed
	// until the next one).
	frontendtest.Settle(t, svc, c.engines)
	c.resolver = prompttokens.New(prompttokens.Options{Engines: dir.Engines, Timeout: 5 * time.Second})
	c.resolver.SetTokenizer("qwen3", tk)
	return c
}

// serve has worker w serve ids (its cache stores the blocks and publishes
// them) and waits until kvrouter's index holds them all for w.
func (c *cluster) serve(t *testing.T, w int, ids []uint32) {
	t.Helper()
	c.engines[w-1].Serve(ids, "")
	c.held(t, w, ids)
}

// held waits until kvrouter's index holds every complete block of ids on
// worker w.
func (c *cluster) held(t *testing.T, w int, ids []uint32) {
	t.Helper()
	want := uint64(len(ids) / blockSize * blockSize)
	frontendtest.WaitFor(t, fmt.Sprintf("worker %d's blocks in the index", w), func() (bool, any) {
		q, err := c.svc.Query(context.Background(), api.QueryRequest{TokenIDs: ids, ModelName: "qwen3"})
		return err == nil && q.Scores[messages.WorkerID(w)][0] >= want, fmt.Sprint(q, err)
	})
}

func (c *cluster) route(t *testing.T, id string, ids []uint32) api.RouteResult {
	t.Helper()
	res, err := c.svc.Route(context.Background(), api.RouteRequest{TokenIDs: ids, ModelName: "qwen3", RequestID: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.svc.Free(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	return res
}

func chat(t *testing.T, messages ...string) prompttokens.Chat {
	t.Helper()
	c, err := prompttokens.ParseChat([]byte(`{"model":"qwen3","messages":[` + strings.Join(messages, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func msg(role, content string) string {
	b, _ := json.Marshal(map[string]string{"role": role, "content": content})
	return string(b)
}

// TestMultiTurnChatRoutesToItsPrefix: turn 1 of a conversation is rendered
// by the engine and served on a worker; turn 2 (the reply and a new
// question appended) renders to ids that extend turn 1's, and routes to
// that worker with every block of turn 1 matched — kvrouter's hashes of
// the resolved ids are the hashes of the engine's KV events.
func TestMultiTurnChatRoutesToItsPrefix(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	system := msg("system", strings.Repeat("You are a meticulous assistant for a KV-cache-aware router; answer with care. ", 6))
	turn1 := chat(t, system, msg("user", "What does the router index?"))
	r1 := c.resolver.Chat(ctx, "qwen3", turn1)
	if r1.Source != prompttokens.FromEngine || len(r1.IDs) < 4*blockSize {
		t.Fatalf("turn 1: %+v", r1)
	}
	first := c.route(t, "turn-1", r1.IDs)
	c.serve(t, int(first.WorkerID), r1.IDs)

	// Fill the other worker with an unrelated prompt, so overlap is what
	// picks, not emptiness.
	other := 3 - int(first.WorkerID)
	unrelated := c.resolver.Chat(ctx, "qwen3", chat(t, msg("user", strings.Repeat("Unrelated question about something else entirely. ", 8))))
	c.serve(t, other, unrelated.IDs)

	turn2 := chat(t, system, msg("user", "What does the router index?"), msg("assistant", "Which worker holds which KV blocks."), msg("user", "And how does it pick a worker?"))
	r2 := c.resolver.Chat(ctx, "qwen3", turn2)
	if r2.Source != prompttokens.FromEngine || !slices.Equal(r2.IDs[:len(r1.IDs)], r1.IDs) {
		t.Fatalf("turn 2's ids do not extend turn 1's: %+v", r2)
	}
	second := c.route(t, "turn-2", r2.IDs)
	if second.WorkerID != first.WorkerID || second.OverlapBlocks != uint32(len(r1.IDs)/blockSize) {
		t.Fatalf("turn 2 routed to worker %d with %d overlap blocks; want worker %d with %d", second.WorkerID, second.OverlapBlocks, first.WorkerID, len(r1.IDs)/blockSize)
	}
}

// TestCompletionFormsReachTheSameBlocks: a completion prompt as text
// (tokenized locally), as the token ids the engine's /tokenize gives, and
// the engine's own ids served on a worker: all hash to the same blocks.
func TestCompletionFormsReachTheSameBlocks(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	text := strings.Repeat("Routing by prefix needs the engine's token ids: 日本語も, emoji 🚀, code `x := 42`. ", 5)
	engineIDs, err := prompttokens.NewEngine(prompttokens.BaseURL(c.resolver.Engines("qwen3")[0]), nil).TokenizeText(ctx, "qwen3", text, true)
	if err != nil {
		t.Fatal(err)
	}
	c.serve(t, 2, engineIDs)
	c.serve(t, 1, c.resolver.Chat(ctx, "qwen3", chat(t, msg("user", strings.Repeat("filler ", 80)))).IDs)
	want := uint32(len(engineIDs) / blockSize)
	for i, p := range []prompttokens.Completion{
		{Text: text, IsText: true, AddSpecialTokens: true},
		{IDs: engineIDs},
	} {
		res := c.resolver.Completion(ctx, "qwen3", p)
		if !slices.Equal(res.IDs, engineIDs) {
			t.Fatalf("form %d (%s): ids differ from the engine's", i, res.Source)
		}
		got := c.route(t, fmt.Sprint("completion-", i), res.IDs)
		if got.WorkerID != 2 || got.OverlapBlocks != want {
			t.Fatalf("form %d (%s): worker %d, %d overlap blocks; want worker 2 with %d", i, res.Source, got.WorkerID, got.OverlapBlocks, want)
		}
	}
}
