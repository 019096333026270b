package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDynamoPeerEndpoints: /register_peer, /deregister_peer, /peers and
// /health answer with the statuses and bodies of Dynamo's standalone
// indexer.
func TestDynamoPeerEndpoints(t *testing.T) {
	h, _, _ := newTestHandler(t, Options{})
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string // exact body, or a substring when it starts with "~"
	}{
		{"GET", "/health", "", 200, ""},
		{"GET", "/peers", "", 200, `[]`},
		{"POST", "/register_peer", `{"url":"http://b:8090"}`, 201, `{"status":"ok"}`},
		{"POST", "/register_peer", `{"url":"http://a:8090"}`, 201, `{"status":"ok"}`},
		{"POST", "/register_peer", `{"url":"http://a:8090"}`, 201, `{"status":"ok"}`},
		{"GET", "/peers", "", 200, `["http://a:8090","http://b:8090"]`},
		{"POST", "/deregister_peer", `{"url":"http://a:8090"}`, 200, `{"status":"ok"}`},
		{"POST", "/deregister_peer", `{"url":"http://a:8090"}`, 404, `~"reason":"unknown_peer"`},
		{"GET", "/peers", "", 200, `["http://b:8090"]`},
		{"POST", "/register_peer", `{}`, 400, `~"reason":"missing_field"`},
		{"POST", "/register_peer", `{"url":"http://bad"}`, 400, `~"reason":"invalid_value"`},
		{"GET", "/register_peer", "", 405, `~method_not_allowed`},
	} {
		status, body := do(c.method, c.path, c.body)
		match := body == c.want
		if strings.HasPrefix(c.want, "~") {
			match = strings.Contains(body, c.want[1:])
		}
		if status != c.status || !match {
			t.Errorf("%s %s %s: %d %s, want %d %s", c.method, c.path, c.body, status, body, c.status, c.want)
		}
	}
}
