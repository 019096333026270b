package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

// TestRankHealthShown: Options.RankHealth's answer is each rank's
// "health" in GET /workers, absent where it gives none.
func TestRankHealthShown(t *testing.T) {
	h, fb, _ := newTestHandler(t, Options{RankHealth: func(r api.RankInfo) *api.HealthInfo {
		if r.ServingEndpoint == "10.0.0.5:8000" {
			return &api.HealthInfo{Healthy: false, ConsecutiveFailures: 3, Checks: 4, Failed: 3, LastError: "status 503"}
		}
		return nil
	}})
	fb.workers = []api.WorkerInfo{{InstanceID: 1, Ranks: []api.RankInfo{
		{DpRank: 0, ModelName: "m", ServingEndpoint: "10.0.0.5:8000"},
		{DpRank: 1, ModelName: "m", ServingEndpoint: "10.0.0.6:8000"},
	}}}
	rec := do(h, http.MethodGet, "/workers", "")
	body := rec.Body.String()
	want := `"health":{"healthy":false,"consecutive_failures":3,"consecutive_passes":0,"checks":4,"failed":3,"last_error":"status 503"}`
	if rec.Code != http.StatusOK || !strings.Contains(body, want) || strings.Count(body, `"health"`) != 1 {
		t.Fatalf("status %d, want one %s:\n%s", rec.Code, want, body)
	}
}
