package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/messages/api"
)

// blockingBackend holds every Route until release is closed, saying on
// entered when one arrives.
type blockingBackend struct {
	*fakeBackend
	entered chan string
	release chan struct{}
}

func (b *blockingBackend) Route(ctx context.Context, req api.RouteRequest) (api.RouteResult, error) {
	b.entered <- req.RequestID
	<-b.release
	return b.fakeBackend.Route(ctx, req)
}

// With the route path busy with as many requests as the gate admits, the
// next /route requests are answered 503 overloaded with Retry-After at
// once, without reaching the Backend, and counted; the admitted ones are
// answered normally when the route path frees, and the gate admits again.
func TestRouteAdmission(t *testing.T) {
	const admitted, over = 3, 2
	be := &blockingBackend{fakeBackend: &fakeBackend{}, entered: make(chan string, admitted), release: make(chan struct{})}
	gate := admission.New(admitted, nil)
	h := New(be, Options{Admission: gate})
	body := func(id string) string {
		return `{"token_ids":[1,2],"model_name":"llama","request_id":"` + id + `"}`
	}
	var wg sync.WaitGroup
	codes := make([]int, admitted)
	for i := range admitted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = do(h, "POST", "/route", body("in"+string(rune('a'+i)))).Code
		}()
	}
	for range admitted { // every admitted request is inside the Backend
		<-be.entered
	}
	for range over {
		rec := do(h, "POST", "/route", body("over"))
		var eb errorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &eb)
		if rec.Code != http.StatusServiceUnavailable || eb.Reason != api.ReasonOverloaded || rec.Header().Get("Retry-After") == "" {
			t.Errorf("over the cap: %d %+v Retry-After %q, want 503 overloaded with Retry-After", rec.Code, eb, rec.Header().Get("Retry-After"))
		}
	}
	if got := gate.Refused(); got != over {
		t.Errorf("refused %d, want %d", got, over)
	}
	for _, c := range be.takeCalls() {
		if strings.Contains(c, `"over"`) {
			t.Errorf("a refused request reached the Backend: %s", c)
		}
	}
	// The gate bounds /route only: /query goes through while it is full.
	if rec := do(h, "POST", "/query", `{"token_ids":[1,2],"model_name":"llama"}`); rec.Code != http.StatusOK {
		t.Errorf("/query with the gate full: %d", rec.Code)
	}
	close(be.release)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("admitted request %d answered %d, want 200", i, c)
		}
	}
	if gate.InFlight() != 0 {
		t.Errorf("%d left in flight", gate.InFlight())
	}
	if rec := do(h, "POST", "/route", body("after")); rec.Code != http.StatusOK {
		t.Errorf("after the route path freed: %d %s", rec.Code, rec.Body)
	}
	var m strings.Builder
	if err := h.WriteMetrics(&m); err != nil || !strings.Contains(m.String(), `kvrouter_http_requests_total{path="/route",code="503"} 2`) {
		t.Errorf("the refusals are not counted as 503s:\n%s", m.String())
	}
}
