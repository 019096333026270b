package service

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/kvrouter/kvrouter/actors/telemetry/metricstest"
	"github.com/kvrouter/kvrouter/messages/api"
)

// /metrics shows the load a route booked on its worker, every other rank
// at 0, and the booking gone once the request is freed.
func TestBookedLoadOnMetrics(t *testing.T) {
	h := newServed(t, 2)
	booked := func(worker uint64) (requests, prefill float64) {
		fams := h.scrape()
		labels := map[string]string{"worker": strconv.FormatUint(worker, 10), "dp_rank": "0"}
		var ok1, ok2 bool
		requests, ok1 = metricstest.Sample(fams, "kvrouter_worker_booked_requests", labels)
		prefill, ok2 = metricstest.Sample(fams, "kvrouter_worker_booked_prefill_tokens", labels)
		if _, ok3 := metricstest.Sample(fams, "kvrouter_worker_booked_decode_blocks", labels); !ok1 || !ok2 || !ok3 {
			t.Fatalf("worker %d: booked load series missing", worker)
		}
		return requests, prefill
	}
	for _, w := range []uint64{1, 2} {
		if r, p := booked(w); r != 0 || p != 0 {
			t.Fatalf("worker %d before any route: %v requests, %v prefill tokens booked", w, r, p)
		}
	}

	code, body := h.post("/route", map[string]any{"token_ids": prompt(5, 6), "model_name": "llama", "request_id": "b1"})
	if code != http.StatusOK {
		t.Fatalf("route: %d %s", code, body)
	}
	var out api.RouteResult
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	chosen, other := uint64(out.WorkerID), uint64(3-out.WorkerID)
	if r, p := booked(chosen); r != 1 || p != 24 {
		t.Errorf("chosen worker %d: %v requests, %v prefill tokens booked; want 1 and the prompt's 24", chosen, r, p)
	}
	if r, p := booked(other); r != 0 || p != 0 {
		t.Errorf("other worker %d: %v requests, %v prefill tokens booked; want 0", other, r, p)
	}

	if code, body := h.post("/route/b1/free", nil); code != http.StatusOK {
		t.Fatalf("free: %d %s", code, body)
	}
	if r, p := booked(chosen); r != 0 || p != 0 {
		t.Errorf("after free, worker %d: %v requests, %v prefill tokens booked; want 0", chosen, r, p)
	}
}
