package picker

import (
	"errors"
	"slices"
	"testing"
)

func TestParsePrompt(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		tk               Tokenizer
		model            string
		tokens           []uint32
		reason           Reason
	}{
		{"token ids", "/v1/completions", `{"model":"m","prompt":[5,6,4294967295]}`, nil, "m", []uint32{5, 6, 4294967295}, ReasonNone},
		{"query string ignored", "/v1/completions?x=1", `{"model":"m","prompt":[5]}`, nil, "m", []uint32{5}, ReasonNone},
		{"text, no tokenizer", "/v1/completions", `{"model":"m","prompt":"hi"}`, nil, "m", nil, ReasonTextPrompt},
		{"text, tokenizer", "/v1/completions", `{"model":"m","prompt":"hi"}`, bytesTokenizer{}, "m", []uint32{'h', 'i'}, ReasonNone},
		{"text, tokenizer refuses", "/v1/completions", `{"model":"m","prompt":"hi"}`, refusingTokenizer{}, "m", nil, ReasonTokenizerError},
		{"batch of texts", "/v1/completions", `{"model":"m","prompt":["a","b"]}`, nil, "m", nil, ReasonBatchPrompt},
		{"batch of token lists", "/v1/completions", `{"model":"m","prompt":[[1],[2]]}`, nil, "m", nil, ReasonBatchPrompt},
		{"empty token list", "/v1/completions", `{"model":"m","prompt":[]}`, nil, "m", nil, ReasonEmptyPrompt},
		{"chat, no tokenizer", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, nil, "m", nil, ReasonChat},
		{"chat, tokenizer", "/v1/chat/completions", `{"model":"m","messages":[]}`, bytesTokenizer{}, "m", []uint32{'[', ']'}, ReasonNone},
		{"other path", "/v1/embeddings", `{"model":"m","input":"x"}`, nil, "m", nil, ReasonOtherPath},
	} {
		p, err := ParsePrompt(c.path, []byte(c.body), c.tk)
		if err != nil || p.Model != c.model || !slices.Equal(p.Tokens, c.tokens) || p.Reason != c.reason {
			t.Errorf("%s: got %+v, %v; want model %q tokens %v reason %v", c.name, p, err, c.model, c.tokens, c.reason)
		}
	}
	for _, bad := range []struct{ path, body string }{
		{"/v1/completions", `not json`},
		{"/v1/completions", `{"prompt":[1]}`},
		{"/v1/completions", `{"model":"m"}`},
		{"/v1/completions", `{"model":"m","prompt":[1.5]}`},
		{"/v1/completions", `{"model":"m","prompt":[-1]}`},
		{"/v1/completions", `{"model":"m","prompt":[4294967296]}`},
		{"/v1/completions", `{"model":"m","prompt":7}`},
		{"/v1/chat/completions", `{"model":"m"}`},
	} {
		if p, err := ParsePrompt(bad.path, []byte(bad.body), nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s %s: got %+v, %v; want ErrInvalid", bad.path, bad.body, p, err)
		}
	}
}

type refusingTokenizer struct{ bytesTokenizer }

func (refusingTokenizer) Completion(string, string) ([]uint32, error) {
	return nil, errors.New("no vocabulary for m")
}
