package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens/enginefake"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

const qwen3Fixture = "../../messages/tokenizer/testdata/qwen3.tokenizer.json.gz"

func TestTokenizerFlags(t *testing.T) {
	var f tokenizerFlags
	for _, v := range []string{"llama=/models/llama/tokenizer.json", "/models/qwen/tokenizer.json"} {
		if err := f.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if len(f) != 2 || f[0] != (tokenizerFlag{"llama", "/models/llama/tokenizer.json"}) || f[1] != (tokenizerFlag{"", "/models/qwen/tokenizer.json"}) {
		t.Fatalf("parsed %+v", f)
	}
	if err := f.Set("m="); err == nil {
		t.Fatal("an empty path was accepted")
	}
	if _, err := newPrompts(tokenizerFlags{{"m", "testdata-missing.json"}}, "default", 0, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "--tokenizer m") {
		t.Fatalf("a missing file: %v", err)
	}
}

type staticWorkers []api.WorkerInfo

func (s staticWorkers) Workers(context.Context) ([]api.WorkerInfo, error) { return s, nil }

// TestPromptsFollowRegisteredEngines: the directory follows the ranks'
// serving endpoints and the guard checks an engine as it appears; its
// block-size warning reaches /workers through rankWarnings.
func TestPromptsFollowRegisteredEngines(t *testing.T) {
	tk, err := tokenizer.Load(qwen3Fixture)
	if err != nil {
		t.Fatal(err)
	}
	fake := &enginefake.Engine{Tokenizer: tk}
	fake.SetBlockSize(32)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p, err := newPrompts(tokenizerFlags{{"", qwen3Fixture}}, "qwen3", 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rank := api.RankInfo{ModelName: "qwen3", BlockSize: 16, ServingEndpoint: strings.TrimPrefix(srv.URL, "http://")}
	ctx := context.Background()
	var st refreshState
	p.refresh(ctx, staticWorkers{}, &st, time.Hour)
	if got := p.rankWarnings(rank); len(got) != 0 || p.dir.Engines("qwen3") != nil {
		t.Fatalf("no workers yet: warnings %q, engines %q", got, p.dir.Engines("qwen3"))
	}
	p.refresh(ctx, staticWorkers{{InstanceID: 1, Ranks: []api.RankInfo{rank}}}, &st, time.Hour)
	warn := p.rankWarnings(rank)
	if len(warn) != 1 || !strings.Contains(warn[0], "block size 32, registered 16") {
		t.Fatalf("warnings %q (engines %q)", warn, p.dir.Engines("qwen3"))
	}
	if got := p.dir.Engines("qwen3"); len(got) != 1 || got[0] != srv.URL {
		t.Fatalf("directory %q", got)
	}
}
