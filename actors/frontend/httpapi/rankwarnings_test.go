package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

// TestRankWarningsAppended: Options.RankWarnings adds its lines after the
// rank's own, and only to the rank it names.
func TestRankWarningsAppended(t *testing.T) {
	h, fb, _ := newTestHandler(t, Options{RankWarnings: func(r api.RankInfo) []string {
		if r.ServingEndpoint == "10.0.0.5:8000" {
			return []string{"engine reports block size 32, registered 16"}
		}
		return nil
	}})
	own := []string{"no events received since registration"}
	fb.workers = []api.WorkerInfo{{InstanceID: 1, Ranks: []api.RankInfo{
		{DpRank: 0, ModelName: "m", ServingEndpoint: "10.0.0.5:8000", Warnings: own},
		{DpRank: 1, ModelName: "m", ServingEndpoint: "10.0.0.6:8000"},
	}}}
	rec := do(h, http.MethodGet, "/workers", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out []api.WorkerInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	r0, r1 := out[0].Ranks[0].Warnings, out[0].Ranks[1].Warnings
	if !slices.Equal(r0, []string{own[0], "engine reports block size 32, registered 16"}) || len(r1) != 0 {
		t.Fatalf("warnings %q / %q", r0, r1)
	}
	if len(own) != 1 || len(fb.workers[0].Ranks[0].Warnings) != 1 {
		t.Fatal("the backend's slice was modified")
	}
}
