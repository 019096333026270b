package bench

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

// tokenizeLines is bench/testdata/tokenize.txt (kvrouter's own docs and
// code, and the golden corpus of hard strings) cut into lines, each
// encoded as one prompt — the same cut the JavaScript side makes.
func tokenizeLines(b *testing.B) (lines []string, bytes int) {
	data, err := os.ReadFile("testdata/tokenize.txt")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		lines = append(lines, l+"\n")
	}
	return lines, len(data)
}

// BenchmarkTokenize: local tokenization on one goroutine, after a warm-up
// pass. Reports MB/s of text (b.SetBytes), tokens/s and allocations per
// token (compare.sh runs it beside the JavaScript reference).
func BenchmarkTokenize(b *testing.B) {
	for _, name := range []string{"qwen3", "gptoss"} {
		b.Run(name, func(b *testing.B) {
			tk, err := tokenizer.Load("../messages/tokenizer/testdata/" + name + ".tokenizer.json.gz")
			if err != nil {
				b.Fatal(err)
			}
			lines, size := tokenizeLines(b)
			var ids []uint32
			encodeAll := func() int {
				n := 0
				for _, l := range lines {
					ids, _ = tk.AppendEncode(ids[:0], l, false)
					n += len(ids)
				}
				return n
			}
			perPass := encodeAll()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				encodeAll()
			}
			b.ReportMetric(float64(perPass)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkEngineCacheHit: a chat prompt the engine rendered before,
// answered from the cache (hash the template inputs, one map lookup).
func BenchmarkEngineCacheHit(b *testing.B) {
	fake, url := tokenizeEngine(b)
	r := prompttokens.New(prompttokens.Options{Engines: func(string) []string { return []string{url} }})
	body := []byte(`{"model":"qwen3","messages":[{"role":"system","content":"` + strings.Repeat("You are a careful assistant. ", 40) +
		`"},{"role":"user","content":"Summarise the design of a KV-cache-aware router in three sentences."}],"tools":[{"type":"function","function":{"name":"lookup","parameters":{}}}]}`)
	c, err := prompttokens.ParseChat(body)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if res := r.Chat(ctx, "qwen3", c); res.Source != prompttokens.FromEngine {
		b.Fatalf("warm-up: %+v", res)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res := r.Chat(ctx, "qwen3", c); !res.Cached {
			b.Fatalf("miss: %+v", res)
		}
	}
	b.StopTimer()
	if n := fake.Calls("/v1/chat/completions/render"); n != 1 {
		b.Fatalf("engine asked %d times", n)
	}
}
