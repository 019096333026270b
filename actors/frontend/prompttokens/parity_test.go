package prompttokens

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens/enginefake"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
	"github.com/kvrouter/kvrouter/messages/tokenizer/tokenizertest"
)

// bytesOnly is a tokenizer that disagrees with Qwen3's on any text of
// more than one byte: every byte is its own token.
func bytesOnly(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tk, err := tokenizer.Parse(tokenizertest.File{}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestParityGuardFires: the local file differs from the engine's (gpt-oss
// locally, Qwen3 on the engine) and the engine runs 32-token blocks where
// 16 were registered. The guard says so in warnings, metrics and the log,
// and text prompts go to the engine; once the local file matches, the
// local tokenizer serves again.
func TestParityGuardFires(t *testing.T) {
	fake, url := fakeEngine(t, func(e *enginefake.Engine) { e.SetBlockSize(32) })
	var dir Directory
	dir.Set([]Target{{Model: "qwen3", URL: strings.TrimPrefix(url, "http://"), BlockSize: 16}})
	r := New(Options{Engines: dir.Engines})
	r.SetTokenizer("qwen3", bytesOnly(t))
	var logs strings.Builder
	g := NewGuard(r, &dir, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()

	f := g.Check(ctx)
	if len(f) != 1 || f[0].Err != "" || len(f[0].Mismatches) == 0 || f[0].EngineBlockSize != 32 {
		t.Fatalf("findings: %+v", f)
	}
	warn := g.Warnings("qwen3", url)
	if len(warn) != 2 || !strings.Contains(warn[0], "disagrees with the engine") || !strings.Contains(warn[1], "block size 32, registered 16") {
		t.Fatalf("warnings: %q", warn)
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("not logged:\n%s", logs.String())
	}
	var m strings.Builder
	if err := g.WriteMetrics(&m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`kvrouter_tokenizer_parity_checks_total{model="qwen3",result="mismatch"} 1`,
		`kvrouter_tokenizer_parity_mismatch{model="qwen3",engine="` + url + `"} 1`,
		`kvrouter_engine_block_size_mismatch{model="qwen3",engine="` + url + `"} 1`,
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, m.String())
		}
	}
	p := Completion{Text: "Hello world", IsText: true, AddSpecialTokens: true}
	if res := r.Completion(ctx, "qwen3", p); res.Source != FromEngine {
		t.Fatalf("after a mismatch the engine must win: %+v", res)
	}

	// The right file, and an engine with the registered block size.
	r.SetTokenizer("qwen3", qwen3(t))
	fake.SetBlockSize(16)
	if f := g.Check(ctx); len(f[0].Mismatches) != 0 || len(g.Warnings("qwen3", url)) != 0 {
		t.Fatalf("parity not restored: %+v %q", f, g.Warnings("qwen3", url))
	}
	if res := r.Completion(ctx, "qwen3", p); res.Source != FromLocal {
		t.Fatalf("after parity the local tokenizer serves: %+v", res)
	}
}

func TestDirectory(t *testing.T) {
	var d Directory
	if d.Engines("m") != nil || d.Targets() != nil {
		t.Fatal("an empty directory lists engines")
	}
	d.Set([]Target{{Model: "m", URL: "10.0.0.2:8000"}, {Model: "m", URL: "http://10.0.0.1:8000/"}, {Model: "m", URL: "http://10.0.0.2:8000"}, {Model: "n", URL: ""}})
	if got := d.Engines("m"); len(got) != 2 || got[0] != "http://10.0.0.1:8000" || got[1] != "http://10.0.0.2:8000" {
		t.Fatalf("engines: %q", got)
	}
	if len(d.Targets()) != 2 || d.Engines("n") != nil {
		t.Fatalf("targets: %+v", d.Targets())
	}
}
