package service

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// A disaggregated fleet over real engine streams: decode workers 1 and 2,
// prefill workers 3 and 4 (4 with an SGLang bootstrap port). A long cold
// prompt is split, its prefill leg on the prefill worker holding its
// prefix; the answer names that worker's serving endpoint and bootstrap
// address; a warm decode worker gets no remote prefill; prefill_done and
// free return every booking to zero; /workers shows the roles.
func TestServeDisaggregatedFleet(t *testing.T) {
	svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	t.Cleanup(srv.Close)
	h := &harness{t: t, url: srv.URL, svc: svc}
	roles := []map[string]any{
		{"role": "decode", "serving_endpoint": "10.0.0.1:8000"},
		{"role": "decode", "serving_endpoint": "10.0.0.2:8000"},
		{"role": "prefill", "serving_endpoint": "10.0.0.3:8000"},
		{"role": "prefill", "serving_endpoint": "10.0.0.4:8000", "bootstrap_port": 8998},
	}
	for i, extra := range roles {
		eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
			BlockSize: 4, CapacityBlocks: 512})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		h.engines = append(h.engines, eng)
		body := map[string]any{"instance_id": i + 1, "endpoint": eng.Endpoint(), "replay_endpoint": eng.ReplayEndpoint(),
			"model_name": "llama", "block_size": 4}
		for k, v := range extra {
			body[k] = v
		}
		if code, out := h.post("/register", body); code != http.StatusCreated {
			t.Fatalf("register %d: %d %s", i+1, code, out)
		}
	}
	if code, out := h.post("/register", map[string]any{"instance_id": 9, "endpoint": "tcp://127.0.0.1:1", "model_name": "llama", "role": "encoder"}); code != http.StatusBadRequest || !strings.Contains(string(out), "role") {
		t.Errorf("unknown role: %d %s", code, out)
	}
	long := prompt(7, 300)             // 1,200 tokens
	h.engines[3].Serve(long[:800], "") // prefill worker 4 holds 200 of its blocks
	warm := prompt(8, 300)
	h.engines[1].Serve(warm, "") // decode worker 2 holds all of it
	h.settle()

	split := h.route(long, "", "cold", true)
	if d := split.Disaggregation; d == nil || !d.Split || d.Reason != api.DisaggUncached {
		t.Fatalf("long cold prompt: %+v", split.Disaggregation)
	}
	want := api.PrefillLeg{WorkerID: 4, OverlapBlocks: 200, CachedTokens: 800, ServingEndpoint: "10.0.0.4:8000", BootstrapHost: "10.0.0.4", BootstrapPort: 8998}
	if p := split.PrefillWorker; p == nil || *p != want {
		t.Fatalf("prefill leg %+v, want %+v", p, want)
	}
	if split.WorkerID != 1 && split.WorkerID != 2 {
		t.Fatalf("decode leg on worker %d", split.WorkerID)
	}
	alt := api.PrefillLeg{WorkerID: 3, ServingEndpoint: "10.0.0.3:8000"}
	if p := split.PrefillAlternate; p == nil || *p != alt {
		t.Fatalf("prefill alternate %+v, want %+v", p, alt)
	}
	local := h.route(warm, "", "warm", true)
	if d := local.Disaggregation; local.WorkerID != 2 || d == nil || d.Split || d.Reason != api.DisaggWarmDecode || local.PrefillWorker != nil ||
		local.PrefillAlternate != nil {
		t.Fatalf("warm prompt: worker %d %+v %+v %+v", local.WorkerID, d, local.PrefillWorker, local.PrefillAlternate)
	}
	// The request path's retry moves the prefill leg to the alternate;
	// never to a decode worker.
	ctx := context.Background()
	if err := svc.MovePrefill(ctx, "llama", api.DefaultTenant, "cold", messages.WorkerKey{Worker: 1}); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("prefill leg moved to a decode worker: %v", err)
	}
	if err := svc.MovePrefill(ctx, "llama", api.DefaultTenant, "cold", messages.WorkerKey{Worker: 3}); err != nil {
		t.Fatal(err)
	}
	prefillOn := map[messages.WorkerID]uint64{}
	for _, l := range loads(t, h)[0].Loads {
		prefillOn[l.WorkerID] = l.PotentialPrefillTokens
	}
	if prefillOn[3] != 400 || prefillOn[4] != 0 {
		t.Fatalf("prefill tokens booked after the move: %v, want the 400 booked on worker 4 (1,200 less its 800 cached) on worker 3", prefillOn)
	}
	for _, step := range []string{"/route/cold/prefill_done", "/route/cold/free", "/route/warm/free"} {
		if code, out := h.post(step, nil); code != http.StatusOK {
			t.Fatalf("%s: %d %s", step, code, out)
		}
	}
	for _, l := range loads(t, h)[0].Loads {
		if l.ActiveRequests != 0 || l.PotentialPrefillTokens != 0 || l.PotentialDecodeBlocks != 0 {
			t.Errorf("after prefill_done and free: %+v", l)
		}
	}
	byID := map[uint64]api.RankInfo{}
	for _, w := range workers(t, h.url) {
		byID[uint64(w.InstanceID)] = w.Ranks[0]
	}
	if byID[1].Role != api.RoleDecode || byID[3].Role != api.RolePrefill || byID[4].BootstrapPort != 8998 || byID[4].BootstrapHost != "10.0.0.4" {
		t.Errorf("/workers roles: %+v %+v %+v", byID[1], byID[3], byID[4])
	}
}

// loads is GET /loads of the harness's one namespace of four ranks.
func loads(t *testing.T, h *harness) []api.NamespaceLoads {
	t.Helper()
	code, out := h.do("GET", "/loads")
	var spaces []api.NamespaceLoads
	if err := json.Unmarshal(out, &spaces); code != http.StatusOK || err != nil || len(spaces) != 1 || len(spaces[0].Loads) != 4 {
		t.Fatalf("loads %d %s (%v)", code, out, err)
	}
	return spaces
}
