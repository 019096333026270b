package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/fleetui"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// fleetBackend is fakeBackend with the fleet page's reads.
type fleetBackend struct {
	*fakeBackend
	log api.DecisionLog
}

func (f *fleetBackend) Decisions(context.Context) (api.DecisionLog, error) { return f.log, nil }

func get(t *testing.T, h http.Handler, path, token string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestFleetPageRendersTheWorkers(t *testing.T) {
	seq := uint64(41)
	fb := &fleetBackend{fakeBackend: &fakeBackend{workers: []api.WorkerInfo{
		{InstanceID: 9, Ranks: []api.RankInfo{{DpRank: 0, ModelName: "m", State: api.StateDegraded, Blocks: 12, LastSeq: &seq}}},
		{InstanceID: 3, Ranks: []api.RankInfo{{DpRank: 1, ModelName: "m<b>", State: api.StateExact}, {DpRank: 0, State: api.StateRecovering}}},
	}}}
	h := New(fb, Options{})
	rec := get(t, h, "/ui", "")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /ui: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if csp := rec.Header().Get("Content-Security-Policy"); csp != fleetui.CSP || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`<tr data-worker="3" data-rank="0" data-state="recovering">`,
		`<tr data-worker="3" data-rank="1" data-state="exact">`,
		`<tr data-worker="9" data-rank="0" data-state="degraded">`,
		`m&lt;b&gt;`, // escaped
		`id="c-degraded">1<`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Index(body, `data-worker="3" data-rank="0"`) > strings.Index(body, `data-worker="3" data-rank="1"`) ||
		strings.Index(body, `data-worker="3"`) > strings.Index(body, `data-worker="9"`) {
		t.Error("rows not sorted by worker, then rank")
	}
	for _, ref := range []string{"http://", "https://", "src=\"", "href=\"http"} {
		if strings.Contains(body, ref) {
			t.Errorf("page refers to something outside itself: %q", ref)
		}
	}
	if rec := get(t, h, "/ui", ""); rec.Code != http.StatusOK {
		t.Errorf("second GET /ui: %d", rec.Code)
	}
}

func TestFleetEndpoints(t *testing.T) {
	fb := &fleetBackend{fakeBackend: &fakeBackend{},
		log: api.DecisionLog{Capacity: 4, Recorded: 1, Decisions: []api.Decision{{WorkerID: 2, Logit: 1.5,
			Scores: []api.RouteScore{{WorkerID: messages.WorkerID(2), Logit: 1.5}}}}}}
	h := New(fb, Options{APIToken: "t", ProtectReads: true})
	for _, path := range []string{"/ui", "/decisions"} {
		if rec := get(t, h, path, ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401 (a read endpoint)", path, rec.Code)
		}
	}
	var log api.DecisionLog
	if rec := get(t, h, "/decisions", "t"); rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &log) != nil || len(log.Decisions) != 1 || log.Decisions[0].Logit != 1.5 {
		t.Errorf("/decisions: %d %s", rec.Code, rec.Body)
	}
	// Without ProtectReads the page is open, as /workers is.
	if rec := get(t, New(fb, Options{APIToken: "t"}), "/ui", ""); rec.Code != http.StatusOK {
		t.Errorf("/ui with open reads: %d", rec.Code)
	}
	// A Backend without the fleet reads: 404 with a reason, the page still renders.
	plain := New(&fakeBackend{}, Options{})
	if rec := get(t, plain, "/decisions", ""); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "keeps no decisions") {
		t.Errorf("/decisions on a plain Backend: %d %s", rec.Code, rec.Body)
	}
	if rec := get(t, plain, "/ui", ""); rec.Code != http.StatusOK {
		t.Errorf("/ui on a plain Backend: %d", rec.Code)
	}
}
