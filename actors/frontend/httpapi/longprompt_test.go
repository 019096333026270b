package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

// longRoute is a /route body of n token ids, each spelled as long as a
// token id can be (4294967295), separated by ", ".
func longRoute(n int) string {
	return `{"model_name":"llama","token_ids":[` + strings.TrimSuffix(strings.Repeat("4294967295, ", n), ", ") + `]}`
}

// TestLongPromptsFitTheDefaultCaps: a prompt as long as the token cap
// admits — 200,000 tokens, and the cap itself, 1,048,576, with the longest
// spelling of every id (≈ 12.6 MB of JSON) — reaches the backend whole;
// one token more is too_many_tokens, not body_too_large. A smaller
// MaxTokens derives a smaller body cap.
func TestLongPromptsFitTheDefaultCaps(t *testing.T) {
	post := func(opts Options, body string) (*httptest.ResponseRecorder, *fakeBackend) {
		h, fb, _ := newTestHandler(t, opts)
		req := httptest.NewRequest("POST", "/route", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, fb
	}
	for _, n := range []int{200_000, DefaultMaxPromptTokens} {
		rec, fb := post(Options{}, longRoute(n))
		if rec.Code != http.StatusOK {
			t.Fatalf("%d tokens: status %d, body %s", n, rec.Code, clip(rec.Body.String()))
		}
		if calls := fb.takeCalls(); len(calls) != 1 || fb.routeTokens != n {
			t.Errorf("%d tokens: backend saw %d calls, the last with %d tokens", n, len(calls), fb.routeTokens)
		}
	}
	rec, _ := post(Options{}, longRoute(DefaultMaxPromptTokens+1))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), api.ReasonTooManyTokens) {
		t.Errorf("cap + 1 tokens: %d %s, want 413 %s", rec.Code, clip(rec.Body.String()), api.ReasonTooManyTokens)
	}
	small := Options{MaxTokens: 1000, MaxBlockHashes: 10}
	if got, want := BodyBytesFor(small.MaxTokens, small.MaxBlockHashes), int64(1000*12+64<<10); got != want {
		t.Errorf("BodyBytesFor(1000, 10) = %d, want %d", got, want)
	}
	rec, _ = post(small, longRoute(10_000))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), api.ReasonBodyTooLarge) {
		t.Errorf("10,000 tokens under MaxTokens 1000: %d %s, want 413 %s", rec.Code, clip(rec.Body.String()), api.ReasonBodyTooLarge)
	}
}
