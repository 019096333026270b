package simengine

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The OpenAI surface serves from the prefix cache: the second request
// with the same prompt reports its blocks cached, streams its tokens as
// server-sent events, and the first request's blocks went out as a KV
// event batch.
func TestOpenAISurfaceServesFromTheCache(t *testing.T) {
	eng, err := New(Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 4, CapacityBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv, err := eng.ServeHTTP("127.0.0.1:0", HTTPOptions{CompletionTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := "http://" + srv.ServingEndpoint()
	post := func(path, body string) *http.Response {
		t.Helper()
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var whole struct {
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	resp := post("/v1/completions", `{"model":"m","prompt":[1,2,3,4,5,6,7,8,9]}`)
	if err := json.NewDecoder(resp.Body).Decode(&whole); err != nil || whole.Usage.PromptTokens != 9 || whole.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("first answer %+v, %v", whole, err)
	}
	resp.Body.Close()
	if st := eng.Stats(); st.Blocks != 2 || st.NextSeq != 1 {
		t.Fatalf("after the first request: %+v, want 2 blocks stored in one published batch", st)
	}
	resp = post("/v1/completions", `{"model":"m","prompt":[1,2,3,4,5,6,7,8,9],"stream":true}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, line)
		}
	}
	if len(events) != 5 || events[4] != "[DONE]" || !strings.Contains(events[3], `"cached_tokens":8`) {
		t.Fatalf("stream %q: want 3 token chunks, usage with 8 cached tokens, [DONE]", events)
	}
	chat := post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	chat.Body.Close()
	bad := post("/v1/completions", `{"model":"m","prompt":{}}`)
	bad.Body.Close()
	if chat.StatusCode != 200 || bad.StatusCode != 400 || srv.Served() != 4 {
		t.Errorf("chat %d, bad prompt %d, served %d", chat.StatusCode, bad.StatusCode, srv.Served())
	}
}
