package picker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

func TestParsePrompt(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		want             string // describePrompt's form
	}{
		{"token ids", "/v1/completions", `{"model":"m","prompt":[5,6,4294967295]}`, "ids:3"},
		{"one prompt in a batch", "/v1/completions", `{"model":"m","prompt":[[5,6]]}`, "ids:2"},
		{"query string ignored", "/v1/completions?x=1", `{"model":"m","prompt":[5]}`, "ids:1"},
		{"text", "/v1/completions", `{"model":"m","prompt":"hi"}`, "text:2"},
		{"batch of texts", "/v1/completions", `{"model":"m","prompt":["a","b"]}`, "none:batch_prompt"},
		{"batch of token lists", "/v1/completions", `{"model":"m","prompt":[[1],[2]]}`, "none:batch_prompt"},
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "chat"},
		{"other path", "/v1/embeddings", `{"model":"m","input":"x"}`, "none:other_path"},
	} {
		p, err := ParsePrompt(c.path, []byte(c.body))
		if err != nil || p.Model != "m" || describePrompt(p) != c.want {
			t.Errorf("%s: got %+v (%s), %v; want %s", c.name, p, describePrompt(p), err, c.want)
		}
	}
	for _, bad := range []struct{ path, body string }{
		{"/v1/completions", `not json`},
		{"/v1/completions", `{"prompt":[1]}`},
		{"/v1/completions", `{"model":"m"}`},
		{"/v1/completions", `{"model":"m","prompt":[1.5]}`},
		{"/v1/completions", `{"model":"m","prompt":[-1]}`},
		{"/v1/completions", `{"model":"m","prompt":7}`},
		{"/v1/chat/completions", `{"model":"m"}`},
	} {
		if p, err := ParsePrompt(bad.path, []byte(bad.body)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s %s: got %+v, %v; want ErrInvalid", bad.path, bad.body, p, err)
		}
	}
}

// TestTokens resolves prompts through the real resolver: ids as sent, text
// through the model's local tokenizer, and the resolver's reasons when it
// has no ids.
func TestTokens(t *testing.T) {
	tk, err := tokenizer.Load("../../../messages/tokenizer/testdata/qwen3.tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	res := prompttokens.New(prompttokens.Options{})
	res.SetTokenizer("qwen3", tk)
	parse := func(path, body string) Prompt {
		p, err := ParsePrompt(path, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		tk     Tokenizer
		p      Prompt
		ids    []uint32
		reason string
	}{
		{"ids, no tokenizer", nil, parse("/v1/completions", `{"model":"x","prompt":[3,4]}`), []uint32{3, 4}, ""},
		{"ids", res, parse("/v1/completions", `{"model":"x","prompt":[3,4]}`), []uint32{3, 4}, ""},
		{"text, local tokenizer", res, parse("/v1/completions", `{"model":"qwen3","prompt":"Hello world"}`), []uint32{9707, 1879}, ""},
		{"text, model without one", res, parse("/v1/completions", `{"model":"x","prompt":"Hello"}`), nil, prompttokens.ReasonNoTokenizer},
		{"text, no tokenizer", nil, parse("/v1/completions", `{"model":"qwen3","prompt":"Hello"}`), nil, prompttokens.ReasonNoTokenizer},
		{"chat waits for the engine", res, parse("/v1/chat/completions", `{"model":"qwen3","messages":[]}`), nil, prompttokens.ReasonNoEngine},
		{"chat, no tokenizer", nil, parse("/v1/chat/completions", `{"model":"qwen3","messages":[]}`), nil, prompttokens.ReasonNoEngine},
		{"empty ids", res, parse("/v1/completions", `{"model":"x","prompt":[]}`), nil, ReasonEmptyPrompt},
		{"parsed as load only", res, parse("/v1/embeddings", `{"model":"x"}`), nil, ReasonOtherPath},
	} {
		ids, reason := tokens(ctx, c.tk, c.p)
		if !slices.Equal(ids, c.ids) || reason != c.reason {
			t.Errorf("%s: got %v %q, want %v %q", c.name, ids, reason, c.ids, c.reason)
		}
	}
}

// TestTokenIDsAsJSON checks the one-pass id reader against encoding/json:
// where it reads a prompt, it reads what json reads; where it declines,
// the general parser decides.
func TestTokenIDsAsJSON(t *testing.T) {
	for _, raw := range []string{`[]`, `[ ]`, `[0]`, `[1,2,3]`, ` [ 1 , 2 ,3 ] `, "[1,\n2]", `[4294967295]`,
		`[4294967296]`, `[01]`, `[-1]`, `[1.5]`, `[1e3]`, `[1,]`, `[,1]`, `[1 2]`, `["a"]`, `[[1]]`, `[1,"a"]`, `[`, `1`} {
		ids, ok := tokenIDs(bytes.TrimSpace([]byte(raw)))
		var want []uint32
		err := json.Unmarshal([]byte(raw), &want)
		if ok && (err != nil || !slices.Equal(ids, want) || ids == nil) {
			t.Errorf("%s: read %v, json reads %v (%v)", raw, ids, want, err)
		}
		if !ok && err == nil {
			t.Errorf("%s: declined a prompt json reads as %v", raw, want)
		}
	}
}
