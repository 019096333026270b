package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/kvrouter/kvrouter/actors/telemetry/metricstest"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
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

// /metrics splits the index's blocks by namespace and by stream, equal to
// what /workers shows; a stream without blocks is there at 0.
func TestIndexBlocksOnMetrics(t *testing.T) {
	h := newServed(t, 2)
	h.engines[1].Serve(prompt(7, 6), "")
	eventually.True(t, "worker 2's six blocks on /metrics", func() (bool, string) {
		_ = h.engines[1].Publish()
		fams := h.scrape()
		w1, ok1 := metricstest.Sample(fams, "kvrouter_worker_index_blocks", map[string]string{"worker": "1", "dp_rank": "0"})
		w2, ok2 := metricstest.Sample(fams, "kvrouter_worker_index_blocks", map[string]string{"worker": "2", "dp_rank": "0"})
		ns, ok3 := metricstest.Sample(fams, "kvrouter_namespace_index_blocks", map[string]string{"model": "llama", "tenant": "default"})
		return ok1 && ok2 && ok3 && w1 == 0 && w2 == 6 && ns == 6, fmt.Sprintf("worker 1 %v (%v), worker 2 %v (%v), namespace %v (%v)", w1, ok1, w2, ok2, ns, ok3)
	})
	ws, err := h.svc.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fams := h.scrape()
	for _, w := range ws {
		for _, r := range w.Ranks {
			got, _ := metricstest.Sample(fams, "kvrouter_worker_index_blocks", map[string]string{"worker": strconv.FormatUint(uint64(w.InstanceID), 10), "dp_rank": "0"})
			if uint64(got) != r.Blocks {
				t.Errorf("worker %d: %v blocks on /metrics, %d on /workers", w.InstanceID, got, r.Blocks)
			}
		}
	}
}
