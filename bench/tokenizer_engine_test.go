package bench

import (
	"net/http/httptest"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens/enginefake"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

// tokenizeEngine serves a fake engine tokenizing with Qwen3's tokenizer.
func tokenizeEngine(b *testing.B) (*enginefake.Engine, string) {
	tk, err := tokenizer.Load("../messages/tokenizer/testdata/qwen3.tokenizer.json.gz")
	if err != nil {
		b.Fatal(err)
	}
	e := &enginefake.Engine{Tokenizer: tk}
	srv := httptest.NewServer(e)
	b.Cleanup(srv.Close)
	return e, srv.URL
}
