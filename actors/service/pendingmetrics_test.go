package service

import (
	"fmt"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/kvrouter/kvrouter/actors/telemetry/metricstest"
)

// /metrics counts the pending selections by outcome per namespace, with
// help text: a selection with an id is remembered and held, its replay
// reservation takes it, a reservation of an id never selected is a miss.
func TestPendingSelectionsOnMetrics(t *testing.T) {
	h := newServed(t, 2)
	ns := map[string]string{"model": "llama", "tenant": "default"}
	read := func() map[string]float64 {
		fams := h.scrape()
		out := map[string]float64{}
		for _, f := range pendingFamilies {
			fam := fams[f.name]
			if fam == nil || fam.GetHelp() == "" || fam.GetType() != dto.MetricType_COUNTER {
				t.Fatalf("%s: missing, without help or not a counter: %v", f.name, fam)
			}
			v, ok := metricstest.Sample(fams, f.name, ns)
			if !ok {
				t.Fatalf("%s{llama, default} missing", f.name)
			}
			out[f.name] = v
		}
		held, ok := metricstest.Sample(fams, "kvrouter_pending_selections", ns)
		if !ok || fams["kvrouter_pending_selections"].GetHelp() == "" {
			t.Fatal("kvrouter_pending_selections{llama, default} missing or without help")
		}
		out["held"] = held
		return out
	}
	want := func(what string, remembered, taken, missed, held float64) {
		t.Helper()
		got := read()
		w := map[string]float64{"kvrouter_pending_selections_remembered_total": remembered, "kvrouter_pending_selections_taken_total": taken,
			"kvrouter_pending_selections_missed_total": missed, "kvrouter_pending_selections_expired_total": 0,
			"kvrouter_pending_selections_evicted_total": 0, "held": held}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s:\n got %v\nwant %v", what, got, w)
		}
	}
	want("before any selection", 0, 0, 0, 0)

	tokens := prompt(3, 4)
	if code, body := h.post("/select", map[string]any{"token_ids": tokens, "model_name": "llama", "selection_id": "p1"}); code != http.StatusOK {
		t.Fatalf("select: %d %s", code, body)
	}
	want("after a selection with an id", 1, 0, 0, 1)

	if code, body := h.post("/reservations", map[string]any{"selection_id": "p1", "model_name": "llama"}); code != http.StatusCreated {
		t.Fatalf("reserve (replay): %d %s", code, body)
	}
	want("after its reservation", 1, 1, 0, 0)

	if code, body := h.post("/reservations", map[string]any{"selection_id": "never", "model_name": "llama"}); code != http.StatusNotFound {
		t.Fatalf("reserve of an id never selected: %d %s", code, body)
	}
	want("after a reservation of an id never selected", 1, 1, 1, 0)
	h.do("DELETE", "/reservations/p1")
}
