package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// burst posts every request at once, each from its own goroutine, and
// returns the answers in request order.
func (h *harness) burst(tokens []uint32, ids []string) []api.RouteResult {
	h.t.Helper()
	out := make([]api.RouteResult, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(map[string]any{"token_ids": tokens, "model_name": "llama", "request_id": id})
			resp, err := http.Post(h.url+"/route", "application/json", bytes.NewReader(b))
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("route %s: %d", id, resp.StatusCode)
				return
			}
			errs[i] = json.NewDecoder(resp.Body).Decode(&out[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			h.t.Fatal(err)
		}
	}
	return out
}

// Four siblings of one 64-block prompt fired at once at four simulated
// engines whose events come only after the burst (each engine serves,
// stores and publishes once its prefill would be done — here, after every
// sibling is routed: an event delay longer than the burst). With
// predictions the siblings land on one worker, which then computes the
// prefix once; without, the index shows no overlap anywhere and the load
// term spreads them, so four engines compute it. Once the events arrive,
// a fifth sibling finds the prefix confirmed in the index.
func TestServeSiblingsBeforeTheirEvents(t *testing.T) {
	p := prompt(7, 64)
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		workers int
		hits    int // blocks the engines found cached serving the burst
	}{{"predictions on", 0, 1, 3 * 64}, {"predictions off", predicted.Off, 4, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second,
				Predictions: predicted.Config{TTL: tc.ttl}}, 4)
			h.settle()
			ids := []string{"s0", "s1", "s2", "s3"}
			res := h.burst(p, ids)
			on := map[messages.WorkerID]bool{}
			predictedSum := 0
			for _, r := range res {
				on[r.WorkerID] = true
				predictedSum += int(r.PredictedBlocks)
				if r.OverlapBlocks != 0 {
					t.Fatalf("an event arrived before the burst ended: %+v", r)
				}
			}
			if len(on) != tc.workers {
				t.Fatalf("siblings on %d workers %v, want %d", len(on), on, tc.workers)
			}
			if want := (tc.workers == 1); want != (predictedSum == 3*64) {
				t.Fatalf("predicted blocks %d in all", predictedSum)
			}
			// The delayed publication: each chosen engine serves its
			// siblings now.
			hits := 0
			for _, r := range res {
				hits += h.engines[r.WorkerID-1].Serve(p, "")
			}
			if hits != tc.hits {
				t.Fatalf("engines found %d blocks cached, want %d", hits, tc.hits)
			}
			for _, id := range ids { // the siblings finish
				if code, out := h.post("/route/"+id+"/free", nil); code != http.StatusOK {
					t.Fatalf("free %s: %d %s", id, code, out)
				}
			}
			h.settle()
			var fifth api.RouteResult
			h.workersUntil("the prefix confirmed in the index", func([]api.WorkerInfo) bool {
				fifth = h.route(p, "", fmt.Sprint("s4-", time.Now().UnixNano()), false)
				return fifth.OverlapBlocks == 64
			})
			if tc.workers == 1 && (fifth.WorkerID != res[0].WorkerID || fifth.PredictedBlocks != 0) {
				t.Fatalf("fifth sibling: %+v, want worker %d, nothing predicted beyond the index", fifth, res[0].WorkerID)
			}
		})
	}
}

// Two siblings sharing a 64-block prefix before any event, the first with
// 64 blocks of its own, the second with 1: with Config.PredictedWaitCheck
// the second would wait behind the first's 128 queued blocks for its
// 1-block prefill where an idle worker prefills its 65 at once, 64 blocks
// sooner; times the 3 idle workers that outweighs the 64 blocks computed
// again, so it goes to an idle worker and
// kvrouter_predicted_wait_withheld_total counts the withheld candidate.
// Without the check it follows the prediction.
func TestServePredictedWaitCheck(t *testing.T) {
	prefix := prompt(7, 64)
	first, second := append(prefix[:64*4:64*4], prompt(8, 64)...), append(prefix[:64*4:64*4], prompt(9, 1)...)
	for _, check := range []bool{true, false} {
		t.Run(fmt.Sprint("check ", check), func(t *testing.T) {
			rc := routing.DefaultConfig()
			rc.PredictedWaitCheck = check
			h := newHarnessWith(t, Config{BlockSize: 4, Routing: rc, Timeout: time.Second}, 4)
			h.settle()
			a := h.route(first, "", "s0", true)
			b := h.route(second, "", "s1", true)
			if together := a.WorkerID == b.WorkerID; together == check || (b.PredictedBlocks == 64) != !check {
				t.Fatalf("siblings on %d and %d, the second with %d predicted blocks", a.WorkerID, b.WorkerID, b.PredictedBlocks)
			}
			var m bytes.Buffer
			if err := h.svc.WritePredictionMetrics(&m); err != nil {
				t.Fatal(err)
			}
			want := "kvrouter_predicted_wait_withheld_total 0\n"
			if check {
				want = "kvrouter_predicted_wait_withheld_total 1\n"
			}
			if !bytes.Contains(m.Bytes(), []byte(want)) {
				t.Errorf("metrics lack %q:\n%s", want, m.String())
			}
		})
	}
}

// registerEventLess registers worker id of model with events "none" and
// a cache of capacity blocks.
func (h *harness) registerEventLess(id int, model string, capacity int) {
	h.t.Helper()
	body := map[string]any{"instance_id": id, "model_name": model, "block_size": 4, "events": "none"}
	if capacity > 0 {
		body["cache_blocks"] = capacity
	}
	code, out := h.post("/register", body)
	if code != http.StatusCreated {
		h.t.Fatalf("register %d: %d %s", id, code, out)
	}
}

func rankOf(ws []api.WorkerInfo, id int) api.RankInfo {
	for _, w := range ws {
		if int(w.InstanceID) == id {
			return w.Ranks[0]
		}
	}
	return api.RankInfo{}
}

// routeModel routes tokens of model and frees the booking.
func (h *harness) routeModel(model string, tokens []uint32, id string) api.RouteResult {
	h.t.Helper()
	code, out := h.post("/route", map[string]any{"token_ids": tokens, "model_name": model, "request_id": id})
	var res api.RouteResult
	if code != http.StatusOK || json.Unmarshal(out, &res) != nil {
		h.t.Fatalf("route %s: %d %s", id, code, out)
	}
	if code, out := h.post("/route/"+id+"/free", nil); code != http.StatusOK {
		h.t.Fatalf("free %s: %d %s", id, code, out)
	}
	return res
}

// A mixed fleet: worker 1 publishes events, workers 2 and 3 none. /workers
// says each one's mode; a prompt routed to an event-less worker routes
// back to it from its own history, and no worker shows a block the router
// did not route there.
func TestServeEventLessWorkersInAMixedFleet(t *testing.T) {
	h := newHarness(t, 1)
	h.settle()
	h.registerEventLess(2, "llama", 16)
	h.registerEventLess(3, "llama", 0) // the server's default size
	ws := workers(t, h.url)
	if r := rankOf(ws, 1); r.Mode != api.ModeEvents || r.State != api.StateExact {
		t.Fatalf("worker 1: %+v, want mode events, exact", r)
	}
	for id, size := range map[int]uint32{2: 16, 3: predicted.DefaultEventLessBlocks} {
		if r := rankOf(ws, id); r.Mode != api.ModePredictions || r.State != api.StateApproximate || r.Blocks != 0 ||
			r.CacheBlocks != size || r.Endpoint != "" || len(r.Warnings) != 0 {
			t.Fatalf("worker %d: %+v, want mode predictions, approximate, empty, %d blocks", id, r, size)
		}
	}
	// Route prompts (their load freed at once: the workers tie, and the
	// tie-break hash picks) until one lands on an event-less worker.
	var first api.RouteResult
	var p []uint32
	for seed := 1; first.WorkerID < 2; seed++ {
		if seed > 50 {
			t.Fatal("no prompt landed on an event-less worker")
		}
		p = prompt(100+seed, 10)
		first = h.routeModel("llama", p, fmt.Sprint("p", seed))
	}
	x := int(first.WorkerID)
	again := h.routeModel("llama", p, "again")
	if int(again.WorkerID) != x || again.PredictedBlocks != 10 || again.OverlapBlocks != 0 {
		t.Fatalf("the prompt again: %+v, want worker %d with 10 predicted blocks", again, x)
	}
	ws = workers(t, h.url)
	for id, want := range map[int]uint64{1: 0, x: 10, 5 - x: 0} {
		if r := rankOf(ws, id); r.Blocks != want {
			t.Fatalf("worker %d shows %d blocks, want %d (what was routed there)", id, r.Blocks, want)
		}
	}
}

// An event-less worker's approximate cache is an LRU of its registered
// capacity: a second prompt on a full cache evicts the first one's tail.
func TestServeEventLessWorkerEvictsAtCapacity(t *testing.T) {
	h := newHarness(t, 0)
	h.registerEventLess(10, "solo", 16)
	p, q := prompt(1, 10), prompt(2, 10)
	h.routeModel("solo", p, "p")
	h.routeModel("solo", q, "q")
	if r := rankOf(workers(t, h.url), 10); r.Blocks != 16 {
		t.Fatalf("%d blocks, want the capacity 16", r.Blocks)
	}
	if r := h.routeModel("solo", p, "p2"); r.PredictedBlocks != 6 {
		t.Fatalf("the older prompt: %d predicted blocks, want 6 (4 evicted)", r.PredictedBlocks)
	}
	if r := h.routeModel("solo", q, "q2"); r.PredictedBlocks != 6 {
		t.Fatalf("q after p was routed again: %d predicted blocks, want 6", r.PredictedBlocks)
	}
}

// Registrations with events "none" are checked: a cache larger than the
// bound is refused, and so is an event-less worker on a cluster router
// (cluster tests cover the latter's path; here the bound).
func TestServeEventLessRegistrationBounds(t *testing.T) {
	h := newHarness(t, 0)
	code, out := h.post("/register", map[string]any{"instance_id": 1, "model_name": "m", "events": "none",
		"cache_blocks": predicted.MaxEventLessBlocks + 1})
	if code != http.StatusBadRequest || !bytes.Contains(out, []byte("cache_blocks")) {
		t.Fatalf("oversized cache: %d %s", code, out)
	}
}

// The prediction metrics count what the route actors did: an event-less
// worker of 16 blocks routed two 10-block prompts holds 16, 4 evicted.
func TestServePredictionMetrics(t *testing.T) {
	svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx := context.Background()
	if err := svc.Register(ctx, api.Registration{InstanceID: 1, ModelName: "m", Events: api.EventsNone, CacheBlocks: 16}); err != nil {
		t.Fatal(err)
	}
	for i, p := range [][]uint32{prompt(1, 10), prompt(2, 10)} {
		if _, err := svc.Route(ctx, api.RouteRequest{ModelName: "m", TokenIDs: p, RequestID: fmt.Sprint("r", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := svc.WritePredictionMetrics(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"kvrouter_predicted_blocks 16\n", `kvrouter_predictions_total{outcome="recorded"} 20` + "\n",
		`kvrouter_predictions_total{outcome="evicted"} 4` + "\n", `kvrouter_predictions_total{outcome="killed"} 0` + "\n"} {
		if !bytes.Contains(b.Bytes(), []byte(line)) {
			t.Errorf("metrics lack %q:\n%s", line, b.String())
		}
	}
}
