package prompttokens

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

var qwen3 = func() func(t testing.TB) *tokenizer.Tokenizer {
	var tk *tokenizer.Tokenizer
	return func(t testing.TB) *tokenizer.Tokenizer {
		t.Helper()
		if tk == nil {
			var err error
			if tk, err = tokenizer.Load("../../../messages/tokenizer/testdata/qwen3.tokenizer.json.gz"); err != nil {
				t.Fatal(err)
			}
		}
		return tk
	}
}()

func TestParseCompletionPrompt(t *testing.T) {
	for _, c := range []struct {
		raw    string
		want   Completion
		errSub string
	}{
		{raw: `"hello"`, want: Completion{Text: "hello", IsText: true, AddSpecialTokens: true}},
		{raw: `[1,2,3]`, want: Completion{IDs: []uint32{1, 2, 3}}},
		{raw: `[[7,8]]`, want: Completion{IDs: []uint32{7, 8}}},
		{raw: `["a","b"]`, errSub: "not a batch"},
		{raw: `{"x":1}`, errSub: "string or an array"},
		{raw: `[-1]`, errSub: "string or an array"},
	} {
		got, err := ParseCompletionPrompt(json.RawMessage(c.raw))
		if c.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSub) {
				t.Errorf("%s: err %v, want %q", c.raw, err, c.errSub)
			}
			continue
		}
		if err != nil || got.Text != c.want.Text || got.IsText != c.want.IsText || !slices.Equal(got.IDs, c.want.IDs) {
			t.Errorf("%s: got %+v, %v; want %+v", c.raw, got, err, c.want)
		}
	}
}

func TestCompletionSources(t *testing.T) {
	r := New(Options{})
	ctx := context.Background()
	if res := r.Completion(ctx, "qwen3", Completion{IDs: []uint32{5, 6}}); res.Source != FromRequest || !slices.Equal(res.IDs, []uint32{5, 6}) {
		t.Fatalf("ids: %+v", res)
	}
	if res := r.Completion(ctx, "qwen3", Completion{Text: "Hello world", IsText: true}); res.Source != FromNone || res.Reason != ReasonNoTokenizer {
		t.Fatalf("no tokenizer: %+v", res)
	}
	r.SetTokenizer("qwen3", qwen3(t))
	res := r.Completion(ctx, "qwen3", Completion{Text: "Hello world", IsText: true, AddSpecialTokens: true})
	if res.Source != FromLocal || !slices.Equal(res.IDs, []uint32{9707, 1879}) {
		t.Fatalf("local: %+v", res)
	}
	var sb strings.Builder
	if err := r.WriteMetrics(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`kvrouter_prompt_tokens_total{source="local",reason=""} 1`,
		`kvrouter_prompt_tokens_total{source="none",reason="no_tokenizer"} 1`,
		`kvrouter_prompt_tokens_total{source="request",reason=""} 1`,
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, sb.String())
		}
	}
}
