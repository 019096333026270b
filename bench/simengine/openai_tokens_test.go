package simengine

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens/enginefake"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
	"github.com/kvrouter/kvrouter/messages/tokenizer/tokenizertest"
)

// With HTTPOptions.Tokens, a chat request's prompt is what the tokenizer
// and template give — the ids the same surface's /tokenize answers — and
// ids given as the prompt stay as they are.
func TestOpenAISurfaceTokenizes(t *testing.T) {
	tk, err := tokenizer.Parse(tokenizertest.File{Merges: [][2]string{{"H", "i"}}}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := New(Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 4, CapacityBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv, err := eng.ServeHTTP("127.0.0.1:0", HTTPOptions{CompletionTokens: 1, Tokens: &enginefake.Engine{Tokenizer: tk}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	post := func(path, body string, out any) {
		t.Helper()
		resp, err := http.Post("http://"+srv.ServingEndpoint()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d, %v", path, resp.StatusCode, err)
		}
	}
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	var tok struct{ Tokens []uint32 }
	post("/tokenize", `{"model":"m",`+msgs+`}`, &tok)
	want, _ := tk.Encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", false)
	if !slices.Equal(tok.Tokens, want) {
		t.Fatalf("/tokenize: %v, want %v", tok.Tokens, want)
	}
	var ans struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	post("/v1/chat/completions", `{"model":"m",`+msgs+`}`, &ans)
	if ans.Usage.PromptTokens != len(want) {
		t.Fatalf("chat ran %d prompt tokens, want %d", ans.Usage.PromptTokens, len(want))
	}
	post("/v1/completions", `{"model":"m","prompt":[5,6,7]}`, &ans)
	if ans.Usage.PromptTokens != 3 {
		t.Fatalf("ids prompt ran %d tokens", ans.Usage.PromptTokens)
	}
}
