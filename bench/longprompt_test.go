package bench

// Long prompts: what a 1,048,576-token route costs (the default
// --max-prompt-tokens). Figures and the command: README.md, "Long prompts".

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/blockhash"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

const longTokens = httpapi.DefaultMaxPromptTokens

func longPrompt() []uint32 {
	p := make([]uint32, longTokens)
	for i := range p {
		p[i] = uint32(i*7919) % 151_936 // a Qwen-sized vocabulary
	}
	return p
}

// BenchmarkLongPromptHash: local hashes of a 1 M-token prompt, block size 16
// (65,536 blocks), as /route computes them.
func BenchmarkLongPromptHash(b *testing.B) {
	p := longPrompt()
	var h blockhash.Hasher
	var dst []uint64
	b.SetBytes(int64(4 * len(p)))
	for b.Loop() {
		dst = h.Hash(dst[:0], p, 16, blockhash.Options{})
	}
	if len(dst) != longTokens/16 {
		b.Fatalf("%d blocks", len(dst))
	}
}

// longFixture serves kvrouter (the default route deadline, 50 ms) with one
// simulated engine that holds the whole 1 M-token prompt.
func longFixture(b *testing.B) (*service.Service, string, []uint32) {
	p := longPrompt()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Routing: routing.DefaultConfig()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	b.Cleanup(srv.Close)
	e, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		BlockSize: 16, CapacityBlocks: longTokens/16 + 16})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	if err := svc.Register(context.Background(), api.Registration{InstanceID: 1, Endpoint: e.Endpoint(),
		ReplayEndpoint: e.ReplayEndpoint(), ModelName: "m", BlockSize: 16}); err != nil {
		b.Fatal(err)
	}
	e.Serve(p, "")
	eventually.Within(b, time.Minute, "the index holds the prompt", func() (bool, string) {
		q, err := svc.Query(context.Background(), api.QueryRequest{TokenIDs: p, ModelName: "m"})
		if err == nil && q.Scores[1][0] == longTokens {
			return true, ""
		}
		_ = e.Publish()
		return false, fmt.Sprintf("scores %+v, %v", q.Scores, err)
	})
	return svc, srv.URL, p
}

// BenchmarkLongPromptRoute: one 1 M-token route answered in process (hash,
// index walk over 65,536 blocks, decision), and over HTTP (≈ 7 MB of JSON
// parsed too), each with its prefill_done and free.
func BenchmarkLongPromptRoute(b *testing.B) {
	svc, url, p := longFixture(b)
	b.Run("in-process", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			res, err := svc.Route(context.Background(), api.RouteRequest{TokenIDs: p, ModelName: "m", TenantID: "default",
				RequestID: fmt.Sprint("p", i)})
			if err != nil || res.OverlapBlocks != longTokens/16 {
				b.Fatalf("route: %+v, %v", res, err)
			}
			_ = svc.Free(context.Background(), res.RequestID)
		}
	})
	body, _ := json.Marshal(map[string]any{"token_ids": p, "model_name": "m"})
	b.Run("http", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			resp, err := http.Post(url+"/route", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var res api.RouteResult
			if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &res) != nil || res.OverlapBlocks != longTokens/16 {
				b.Fatalf("route: %d %.200s", resp.StatusCode, out)
			}
			_ = svc.Free(context.Background(), res.RequestID)
		}
	})
}
