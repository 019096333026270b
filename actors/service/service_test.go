package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// harness is a served kvrouter with simulated engines.
type harness struct {
	t       *testing.T
	url     string
	svc     *Service
	engines []*simengine.Engine
	// patience bounds each wait for a condition (0: eventually.Deadline).
	patience time.Duration
}

func newHarness(t *testing.T, engines int) *harness {
	t.Helper()
	return newHarnessWith(t, Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second}, engines)
}

func newHarnessWith(t *testing.T, cfg Config, engines int) *harness {
	t.Helper()
	svc, err := New(actor.NewActorSystem(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	t.Cleanup(srv.Close)
	h := &harness{t: t, url: srv.URL, svc: svc}
	for i := 0; i < engines; i++ {
		eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
			BlockSize: 4, CapacityBlocks: 256})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		h.engines = append(h.engines, eng)
		code, body := h.post("/register", map[string]any{"instance_id": i + 1, "endpoint": eng.Endpoint(),
			"replay_endpoint": eng.ReplayEndpoint(), "model_name": "llama", "block_size": 4})
		if code != http.StatusCreated {
			t.Fatalf("register: %d %s", code, body)
		}
	}
	return h
}

func (h *harness) post(path string, body any) (int, []byte) {
	h.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(h.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// settle waits until every registered worker's stream is exact and caught
// up, heartbeating the engines meanwhile.
func (h *harness) settle() {
	h.t.Helper()
	settled := func(ws []api.WorkerInfo) bool {
		ok := len(ws) == len(h.engines)
		for i, w := range ws {
			r := w.Ranks[0]
			ok = ok && r.State == api.StateExact && r.LastSeq != nil && *r.LastSeq+1 == h.engines[i].Stats().NextSeq
		}
		if !ok {
			for _, e := range h.engines {
				_ = e.Publish()
			}
		}
		return ok
	}
	h.workersUntil("workers settled", settled)
}

func prompt(seed, blocks int) []uint32 {
	p := make([]uint32, blocks*4)
	for i := range p {
		p[i] = uint32(seed*1000 + i)
	}
	return p
}

// A prompt an engine served routes back to that engine with its whole
// prefix as overlap; /query reports the overlap in tokens.
func TestServeRoutesToTheWorkerHoldingThePrefix(t *testing.T) {
	h := newHarness(t, 3)
	for i, e := range h.engines {
		e.Serve(prompt(i+1, 6), "")
	}
	h.settle()
	for i := range h.engines {
		tokens := append(prompt(i+1, 6), 7, 7, 7) // the cached prefix plus a new tail
		code, body := h.post("/route", map[string]any{"token_ids": tokens, "model_name": "llama", "request_id": fmt.Sprint("r", i)})
		if code != http.StatusOK {
			t.Fatalf("route: %d %s", code, body)
		}
		var res api.RouteResult
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		if int(res.WorkerID) != i+1 || res.OverlapBlocks != 6 || res.CachedTokens != 24 {
			t.Errorf("prompt of worker %d routed to %+v", i+1, res)
		}
		code, body = h.post("/query", map[string]any{"token_ids": prompt(i+1, 6), "model_name": "llama"})
		var q api.QueryResult
		_ = json.Unmarshal(body, &q)
		if code != http.StatusOK || q.Scores[res.WorkerID][0] != 24 || len(q.Scores) != 1 {
			t.Errorf("query: %d %s", code, body)
		}
	}
	// Bookkeeping: the first request is in flight on worker 1.
	if code, body := h.post("/route/r0/prefill_done", nil); code != http.StatusOK {
		t.Errorf("prefill_done: %d %s", code, body)
	}
	if code, body := h.post("/route/r0/free", nil); code != http.StatusOK {
		t.Errorf("free: %d %s", code, body)
	}
	if code, _ := h.post("/route/r0/free", nil); code != http.StatusNotFound {
		t.Errorf("second free: %d, want 404", code)
	}
}

// Load moves new prompts away from a busy worker; unknown models are 404;
// unregistering a worker removes it from routing and the index.
func TestServeLoadUnknownModelAndUnregister(t *testing.T) {
	h := newHarness(t, 2)
	h.settle()
	first := map[uint64]int{}
	for i := 0; i < 6; i++ {
		code, body := h.post("/route", map[string]any{"token_ids": prompt(50+i, 8), "model_name": "llama"})
		var res api.RouteResult
		_ = json.Unmarshal(body, &res)
		if code != http.StatusOK {
			t.Fatalf("route: %d %s", code, body)
		}
		first[uint64(res.WorkerID)]++
	}
	if first[1] != 3 || first[2] != 3 {
		t.Errorf("cold prompts under growing load should alternate: %v", first)
	}
	if code, body := h.post("/route", map[string]any{"token_ids": prompt(1, 2), "model_name": "nope"}); code != http.StatusNotFound {
		t.Errorf("unknown model: %d %s", code, body)
	}
	if code, body := h.post("/unregister", map[string]any{"instance_id": 2, "model_name": "llama"}); code != http.StatusOK {
		t.Fatalf("unregister: %d %s", code, body)
	}
	for i := 0; i < 3; i++ {
		_, body := h.post("/route", map[string]any{"token_ids": prompt(80+i, 8), "model_name": "llama"})
		var res api.RouteResult
		_ = json.Unmarshal(body, &res)
		if res.WorkerID != 1 {
			t.Errorf("routed to unregistered worker: %s", body)
		}
	}
	if code, _ := h.post("/register", map[string]any{"instance_id": 1, "endpoint": "tcp://127.0.0.1:1", "model_name": "llama"}); code != http.StatusConflict {
		t.Errorf("duplicate registration: %d, want 409", code)
	}
}

// A worker whose stream lost history is routed honestly and flagged.
func TestServeFlagsDegradedWorkers(t *testing.T) {
	h := newHarness(t, 0)
	// An engine that has published before the router came and has no replay
	// endpoint: its history is unknown.
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 4, CapacityBlocks: 64, SeqStart: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if code, body := h.post("/register", map[string]any{"instance_id": 5, "endpoint": eng.Endpoint(), "model_name": "m"}); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	eventually.True(t, "the answer flagged degraded", func() (bool, string) {
		_ = eng.Publish() // heard late: seq 40 and on, history unknown
		_, body := h.post("/route", map[string]any{"token_ids": prompt(9, 3), "model_name": "m", "include_scores": true})
		var res api.RouteResult
		_ = json.Unmarshal(body, &res)
		return res.Degraded && len(res.Scores) == 1 && res.Scores[0].Degraded, string(body)
	})
}

// A worker registered with the wrong block size, or one that never sends
// anything, is reported in /workers rather than silently scored zero.
func TestServeWarnsAboutMisconfiguredWorkers(t *testing.T) {
	h := newHarnessWith(t, Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second, SilentAfter: time.Nanosecond}, 0)
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 8, CapacityBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	for _, reg := range []map[string]any{
		{"instance_id": 1, "endpoint": eng.Endpoint(), "model_name": "m", "block_size": 4}, // engine uses 8
		{"instance_id": 2, "endpoint": "tcp://127.0.0.1:9", "model_name": "m", "block_size": 4},
	} {
		if code, body := h.post("/register", reg); code != http.StatusCreated {
			t.Fatalf("register: %d %s", code, body)
		}
	}
	h.workersUntil("both warnings", func(ws []api.WorkerInfo) bool {
		eng.Serve(prompt(int(time.Now().UnixNano()%1000), 4), "") // the next poll sees it
		return len(ws) == 2 && hasWarning(ws[0], "block size") && hasWarning(ws[1], "no events")
	})
}

// An engine that goes away is reported recovering, with a warning, while
// the listener reconnects; it is exact again once it is back.
func TestServeReportsALostEngine(t *testing.T) {
	h := newHarness(t, 1)
	h.engines[0].Serve(prompt(1, 4), "")
	h.settle()
	endpoint, replay := h.engines[0].Endpoint(), h.engines[0].ReplayEndpoint()
	if err := h.engines[0].Close(); err != nil {
		t.Fatal(err)
	}
	lost := func(ws []api.WorkerInfo) bool {
		return len(ws) == 1 && ws[0].Ranks[0].State == api.StateRecovering && hasWarning(ws[0], "connection to the engine lost")
	}
	h.workersUntil("the lost engine reported", lost)
	eng, err := simengine.New(simengine.Options{Endpoint: endpoint, ReplayEndpoint: replay, BlockSize: 4, CapacityBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	h.engines[0] = eng
	h.settle()
}

// workersUntil polls /workers until done holds (eventually.True); the
// test fails with the last answer if it never does.
func (h *harness) workersUntil(what string, done func([]api.WorkerInfo) bool) {
	h.t.Helper()
	patience := h.patience
	if patience == 0 {
		patience = eventually.Deadline
	}
	eventually.Within(h.t, patience, what, func() (bool, string) {
		ws := workers(h.t, h.url)
		return done(ws), fmt.Sprintf("%+v", ws)
	})
}

// workers is the answer of GET /workers.
func workers(t *testing.T, url string) []api.WorkerInfo {
	t.Helper()
	resp, err := http.Get(url + "/workers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ws []api.WorkerInfo
	_ = json.NewDecoder(resp.Body).Decode(&ws)
	return ws
}

func hasWarning(w api.WorkerInfo, substr string) bool {
	for _, r := range w.Ranks {
		for _, msg := range r.Warnings {
			if bytes.Contains([]byte(msg), []byte(substr)) {
				return true
			}
		}
	}
	return false
}

// A prompt of 1,048,576 tokens (the default --max-prompt-tokens) is
// ingested from one engine event and routed end to end: the body (≈ 8 MB
// of JSON) and the token count are within the default caps, the engine's
// single BlockStored of 262,144 blocks is within the decoder's per-event
// caps, and the route answers with the whole prompt as overlap.
func TestServeRoutesAMillionTokenPrompt(t *testing.T) {
	const blocks = httpapi.DefaultMaxPromptTokens / 4
	svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	t.Cleanup(srv.Close)
	// Ingesting 262,144 blocks takes seconds under the race detector.
	h := &harness{t: t, url: srv.URL, patience: time.Minute}
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		BlockSize: 4, CapacityBlocks: blocks + 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	h.engines = append(h.engines, eng)
	if code, body := h.post("/register", map[string]any{"instance_id": 1, "endpoint": eng.Endpoint(),
		"replay_endpoint": eng.ReplayEndpoint(), "model_name": "llama", "block_size": 4}); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	long := prompt(1, blocks)
	eng.Serve(long, "")
	h.settle()
	code, body := h.post("/route", map[string]any{"token_ids": long, "model_name": "llama"})
	if code != http.StatusOK {
		t.Fatalf("route of %d tokens: %d %.300s", len(long), code, body)
	}
	var res api.RouteResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.WorkerID != 1 || res.OverlapBlocks != blocks || res.Partial {
		t.Errorf("route of %d tokens: worker %d, overlap %d blocks (want %d), partial %v", len(long),
			res.WorkerID, res.OverlapBlocks, blocks, res.Partial)
	}
}
