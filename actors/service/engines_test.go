package service

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/telemetry/metricstest"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/api"
)

// A simulated engine of each family, as kvrouter tells them apart on the
// wire: vLLM ≥ 0.26 (map events, seqs from 0, the 4-frame replay layout),
// SGLang (positional events with its metadata map, seqs from 0, the
// 3-frame replay layout) and TensorRT-LLM (map events, seqs from its start
// time in nanoseconds, no replay endpoint).
var families = []struct {
	name    string
	opts    simengine.Options
	session string // SGLang's metadata map carries the session id
	// evidence is part of what /workers says the stream showed.
	evidence string
}{
	{"vllm", simengine.Options{Encoding: simengine.EncodingVLLMMap}, "", "map-encoded events"},
	{"sglang", simengine.Options{Encoding: simengine.EncodingSGLang, LegacyReplay: true}, "conv-1", "an SGLang metadata map"},
	{"trtllm", simengine.Options{Encoding: simengine.EncodingVLLMMap, SeqStart: uint64(time.Now().UnixNano())}, "", "nanosecond-timestamp seqs (first "},
}

// startFamily starts family i's simulated engine and registers it as
// worker i+1 of model llama, with engine (nil: no engine key).
func (h *harness) startFamily(i int, engine any) *simengine.Engine {
	h.t.Helper()
	f := families[i]
	opts := f.opts
	opts.Endpoint, opts.BlockSize, opts.CapacityBlocks = "tcp://127.0.0.1:0", 4, 256
	if f.name != "trtllm" {
		opts.ReplayEndpoint = "tcp://127.0.0.1:0"
	}
	eng, err := simengine.New(opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { eng.Close() })
	body := map[string]any{"instance_id": i + 1, "endpoint": eng.Endpoint(), "model_name": "llama", "block_size": 4}
	if eng.ReplayEndpoint() != "" {
		body["replay_endpoint"] = eng.ReplayEndpoint()
	}
	if engine != nil {
		body["engine"] = engine
	}
	if code, out := h.post("/register", body); code != http.StatusCreated {
		h.t.Fatalf("register %s: %d %s", f.name, code, out)
	}
	h.engines = append(h.engines, eng)
	return eng
}

// serveFamilies has each engine serve its own prompt once its stream is
// heard (an engine without replay loses what it publishes before the
// subscription), then waits until /workers shows each one's blocks and
// done holds.
func (h *harness) serveFamilies(what string, done func(api.RankInfo, int) bool) {
	h.t.Helper()
	served := make([]bool, len(h.engines))
	h.workersUntil(what, func(ws []api.WorkerInfo) bool {
		ok := len(ws) == len(h.engines)
		for i := 0; ok && i < len(ws); i++ {
			r := ws[i].Ranks[0]
			if r.LastSeq != nil && !served[i] {
				h.engines[i].Serve(prompt(i+1, 6), families[i].session)
				served[i] = true
			}
			ok = r.Blocks == 6 && done(r, i)
		}
		if !ok {
			for _, e := range h.engines {
				_ = e.Publish()
			}
		}
		return ok
	})
}

// routesHome checks that each engine's prompt routes to it with its whole
// prefix cached: every stream was indexed as its engine published it.
func (h *harness) routesHome() {
	h.t.Helper()
	for i := range h.engines {
		code, body := h.post("/route", map[string]any{"token_ids": prompt(i+1, 6), "model_name": "llama"})
		var res api.RouteResult
		_ = json.Unmarshal(body, &res)
		if code != http.StatusOK || int(res.WorkerID) != i+1 || res.OverlapBlocks != 6 {
			h.t.Errorf("%s's prompt: %d %s", families[i].name, code, body)
		}
	}
}

// One router follows a vLLM, an SGLang and a TensorRT-LLM worker at once,
// registered without an engine or with auto: each stream is decided from
// what it shows, the decision and its evidence are in /workers, and each
// engine's prompt routes back to it.
func TestServeMixedEnginesDetectedPerStream(t *testing.T) {
	h := newHarness(t, 0)
	for i, engine := range []any{nil, "auto", nil} {
		h.startFamily(i, engine)
	}
	h.serveFamilies("each stream's engine detected", func(r api.RankInfo, i int) bool {
		return r.Engine == "auto" && r.EngineDetected == families[i].name &&
			strings.Contains(r.EngineEvidence, families[i].evidence) && len(r.Warnings) == 0
	})
	for i, w := range workers(t, h.url) { // the proxy's split requests follow it
		if got := h.svc.EngineOf(w.InstanceID); got != families[i].name {
			t.Errorf("EngineOf(%d) = %q, want the detected %s", w.InstanceID, got, families[i].name)
		}
	}
	if got := h.svc.EngineOf(999); got != "" {
		t.Errorf("EngineOf of an unregistered worker: %q", got)
	}
	ws := workers(t, h.url)
	for i := range 2 { // replayed from their first batch: exact
		if st := ws[i].Ranks[0].State; st != api.StateExact {
			t.Errorf("%s: state %s, want exact", families[i].name, st)
		}
	}
	h.routesHome()
}

// Registrations that name their engine are followed as named and agree
// with what arrives; an unknown engine is refused with a reason.
func TestServeRegisteredEngines(t *testing.T) {
	h := newHarness(t, 0)
	for i, f := range families {
		h.startFamily(i, f.name)
	}
	h.serveFamilies("each stream as registered", func(r api.RankInfo, i int) bool {
		return r.Engine == families[i].name && r.EngineDetected == families[i].name && len(r.Warnings) == 0
	})
	for i, w := range workers(t, h.url) {
		if got := h.svc.EngineOf(w.InstanceID); got != families[i].name {
			t.Errorf("EngineOf(%d) = %q, want the registered %s", w.InstanceID, got, families[i].name)
		}
	}
	h.routesHome()
	code, body := h.post("/register", map[string]any{"instance_id": 9, "endpoint": "tcp://127.0.0.1:9",
		"model_name": "llama", "engine": "llamacpp"})
	var e struct{ Error, Reason string }
	_ = json.Unmarshal(body, &e)
	if code != http.StatusBadRequest || e.Reason != api.ReasonInvalidValue || !strings.Contains(e.Error, "auto, sglang, trtllm, vllm") {
		t.Errorf("unknown engine: %d %s", code, body)
	}
	if len(workers(t, h.url)) != 3 {
		t.Error("a refused registration must not be registered")
	}
}

// A TensorRT-LLM stream registered as vLLM is decoded as registered, and
// says so loudly: a /workers warning naming both engines, and a metric.
func TestServeWarnsWhenAStreamContradictsItsEngine(t *testing.T) {
	h := newServed(t, 0)
	h.startFamily(0, nil)
	h.startFamily(2, "vllm") // worker 3, its engine misnamed
	h.workersUntil("the contradiction reported", func(ws []api.WorkerInfo) bool {
		for _, e := range h.engines {
			_ = e.Publish()
		}
		if len(ws) != 2 {
			return false
		}
		trt := ws[1].Ranks[0]
		return len(ws[0].Ranks[0].Warnings) == 0 && trt.Engine == "vllm" && trt.EngineDetected == "trtllm" &&
			hasWarning(ws[1], "registered as engine vllm, but the stream shows nanosecond-timestamp seqs")
	})
	n, ok := metricstest.Sample(h.scrape(), "kvrouter_engine_contradictions_total", map[string]string{"worker": "3", "engine": "vllm"})
	if !ok || n < 1 {
		t.Errorf("kvrouter_engine_contradictions_total{worker=3,engine=vllm} = %v (found %v), want ≥ 1", n, ok)
	}
	if _, ok := metricstest.Sample(h.scrape(), "kvrouter_engine_contradictions_total", map[string]string{"worker": "1"}); ok {
		t.Error("an auto stream is never contradicted")
	}
}

// A dump carries each stream's engine, and a router warmed up from it
// follows the streams with the same engines.
func TestBootstrapKeepsTheEngines(t *testing.T) {
	h := newHarness(t, 0)
	h.startFamily(0, nil)
	h.startFamily(1, "sglang")
	h.serveFamilies("the peer caught up", func(api.RankInfo, int) bool { return true })
	b, _ := newRouter(t)
	if _, err := b.Bootstrap(context.Background(), h.url, ""); err != nil {
		t.Fatal(err)
	}
	ws, err := b.Workers(context.Background())
	if err != nil || len(ws) != 2 {
		t.Fatalf("workers %+v, %v", ws, err)
	}
	for i, want := range []string{"auto", "sglang"} {
		if got := ws[i].Ranks[0].Engine; got != want {
			t.Errorf("worker %d: engine %q after bootstrap, want %q", i+1, got, want)
		}
	}
}
