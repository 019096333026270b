package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
)

// The proxy's POSTs go through the edge: with one in flight and a cap of
// one, the next is answered 429 overloaded with Retry-After in OpenAI's
// error shape without reaching the proxy; its GETs pass.
func TestEdgeProxy(t *testing.T) {
	edge := admission.NewEdge(admission.EdgeConfig{EdgeLimits: admission.EdgeLimits{MaxInFlight: 1}})
	inside, release := make(chan struct{}), make(chan struct{})
	var reached []string
	h := edgeProxy(edge, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.Path)
		if r.URL.Path == "/hold" {
			close(inside)
			<-release
		}
	}))
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/hold", strings.NewReader("{}")))
		close(done)
	}()
	<-inside
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader("{}")))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"code":"overloaded"`) {
		t.Errorf("over the edge: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/models", nil))
	close(release)
	<-done
	if got := strings.Join(reached, ","); got != "POST /hold,GET /v1/models" {
		t.Errorf("reached the proxy: %s", got)
	}
	if edge.Refused("proxy", admission.ReasonHostInFlight) != 1 {
		t.Error("the refusal was not counted under proxy")
	}
	if n, _ := edge.InFlight(); n != 0 {
		t.Errorf("%d in flight after the answers", n)
	}
}
