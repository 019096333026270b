package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

func ptr[T any](v T) *T { return &v }

func fixtureWorkers() []api.WorkerInfo {
	// Deliberately unsorted, with nil warnings and no endpoints map: the
	// server sorts and fills.
	return []api.WorkerInfo{
		{InstanceID: 2, Ranks: []api.RankInfo{
			{DpRank: 1, ModelName: "llama", TenantID: "default", Endpoint: "tcp://10.0.0.2:5558", BlockSize: 16,
				State: api.StateRecovering, Warnings: []string{"no events yet"}},
			{DpRank: 0, ModelName: "llama", TenantID: "default", Endpoint: "tcp://10.0.0.2:5557",
				ReplayEndpoint: "tcp://10.0.0.2:5600", ServingEndpoint: "10.0.0.2:8000", BlockSize: 16, State: api.StateExact, LastSeq: ptr[uint64](41),
				LagSeconds: 0.25, Blocks: 1234},
		}},
		{InstanceID: 1, Ranks: []api.RankInfo{
			{DpRank: 0, ModelName: "llama", TenantID: "acme", Endpoint: "tcp://10.0.0.1:5557", LoraName: "sql",
				BlockSize: 32, State: api.StateDegraded, LastSeq: ptr[uint64](7), LagSeconds: 1.5, Blocks: 10,
				Warnings: []string{"block size mismatch"}},
		}},
	}
}

func fixtureDump() ([]api.DumpNamespace, [][]messages.RouterEvent) {
	ns := []api.DumpNamespace{
		{ModelName: "llama", TenantID: "default", BlockSize: 16, Streams: []api.DumpStream{
			{WorkerID: 1, Endpoint: "tcp://10.0.0.5:5557", ReplayEndpoint: "tcp://10.0.0.5:5558", Seq: ptr[uint64](41), Exact: true},
			{WorkerID: 18446744073709551615, DpRank: 3, Endpoint: "tcp://h:1", LoraName: "ad"},
		}},
		{ModelName: "llama:v2", TenantID: "acme", BlockSize: 32},
		{ModelName: "empty", TenantID: "t", BlockSize: 16},
	}
	evs := [][]messages.RouterEvent{
		{
			{WorkerID: 1, StorageTier: messages.TierDevice, Event: messages.KvCacheEvent{
				EventID: 1, Kind: messages.KindStored, Blocks: []messages.StoredBlock{{BlockHash: 11, TokensHash: 22}}}},
			{WorkerID: 18446744073709551615, StorageTier: messages.TierHost, SessionID: "s\"1\n✓", Event: messages.KvCacheEvent{
				EventID: 2, DpRank: 3, Kind: messages.KindStored, HasParent: true, ParentHash: 11,
				Blocks: []messages.StoredBlock{{BlockHash: 18446744073709551615, TokensHash: 9223372036854775808}, {BlockHash: 5, TokensHash: 6}}}},
			{WorkerID: 1, StorageTier: messages.TierDisk, Event: messages.KvCacheEvent{
				EventID: 3, Kind: messages.KindRemoved, Removed: []messages.ExternalHash{11, 12}}},
		},
		{
			{WorkerID: 2, StorageTier: messages.TierExternal, Event: messages.KvCacheEvent{EventID: 9, DpRank: 1, Kind: messages.KindCleared}},
		},
		nil,
	}
	return ns, evs
}

const goldenDump = `{
"llama:default":{"model_name":"llama","tenant_id":"default","block_size":16,"streams":[{"worker_id":1,"dp_rank":0,"endpoint":"tcp://10.0.0.5:5557","replay_endpoint":"tcp://10.0.0.5:5558","seq":41,"exact":true},{"worker_id":18446744073709551615,"dp_rank":3,"endpoint":"tcp://h:1","lora_name":"ad"}],"events":[
{"worker_id":1,"storage_tier":"device","event":{"event_id":1,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":11,"tokens_hash":22}]}},"dp_rank":0}},
{"worker_id":18446744073709551615,"storage_tier":"host_pinned","event":{"event_id":2,"data":{"stored":{"parent_hash":11,"blocks":[{"block_hash":18446744073709551615,"tokens_hash":9223372036854775808},{"block_hash":5,"tokens_hash":6}]}},"dp_rank":3},"session_id":"s\"1\n✓"},
{"worker_id":1,"storage_tier":"disk","event":{"event_id":3,"data":{"removed":{"block_hashes":[11,12]}},"dp_rank":0}}
]},
"llama:v2:acme":{"model_name":"llama:v2","tenant_id":"acme","block_size":32,"events":[
{"worker_id":2,"storage_tier":"external","event":{"event_id":9,"data":"cleared","dp_rank":1}}
]},
"empty:t":{"model_name":"empty","tenant_id":"t","block_size":16,"events":[
]}
}
`

// TestGolden pins every endpoint's success answer byte for byte, and what
// the Backend received.
func TestGolden(t *testing.T) {
	const maxU64 = "18446744073709551615"
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		setup      func(*fakeBackend)
		wantStatus int
		wantBody   string
		wantCalls  []string
	}{
		{
			name: "register all fields", method: "POST", path: "/register",
			body: `{"instance_id":` + maxU64 + `,"endpoint":"tcp://10.0.0.5:5557","model_name":"llama","tenant_id":"acme",
				"block_size":16,"dp_rank":3,"lora_name":"sql","replay_endpoint":"tcp://10.0.0.5:5558","serving_endpoint":"http://10.0.0.5:8000"}`,
			wantStatus: 201, wantBody: `{"status":"ok"}`,
			wantCalls: []string{`Register {"instance_id":18446744073709551615,"endpoint":"tcp://10.0.0.5:5557","model_name":"llama","tenant_id":"acme","block_size":16,"dp_rank":3,"lora_name":"sql","replay_endpoint":"tcp://10.0.0.5:5558","serving_endpoint":"http://10.0.0.5:8000"}`},
		},
		{
			name: "register reference shape, unknown field ignored, defaults", method: "POST", path: "/register",
			body:       `{"instance_id":1,"endpoint":"ipc:///tmp/kv.sock","model_name":"llama","medium":["L1"],"tenant_id":"","lora_name":null}`,
			wantStatus: 201, wantBody: `{"status":"ok"}`,
			wantCalls: []string{`Register {"instance_id":1,"endpoint":"ipc:///tmp/kv.sock","model_name":"llama","tenant_id":"default","dp_rank":0}`},
		},
		{
			name: "unregister every rank of every tenant", method: "POST", path: "/unregister",
			body:       `{"instance_id":1,"model_name":"llama"}`,
			wantStatus: 200, wantBody: `{"status":"ok"}`,
			wantCalls: []string{`Unregister {"instance_id":1,"model_name":"llama"}`},
		},
		{
			name: "unregister one rank of one tenant", method: "POST", path: "/unregister",
			body:       `{"instance_id":` + maxU64 + `,"model_name":"llama","tenant_id":"acme","dp_rank":0,"extra":true}`,
			wantStatus: 200, wantBody: `{"status":"ok"}`,
			wantCalls: []string{`Unregister {"instance_id":18446744073709551615,"model_name":"llama","tenant_id":"acme","dp_rank":0}`},
		},
		{
			name: "workers sorted with endpoints and rank state", method: "GET", path: "/workers",
			setup:      func(f *fakeBackend) { f.workers = fixtureWorkers() },
			wantStatus: 200,
			wantBody: `[{"instance_id":1,"endpoints":{"0":"tcp://10.0.0.1:5557"},"ranks":[` +
				`{"dp_rank":0,"model_name":"llama","tenant_id":"acme","endpoint":"tcp://10.0.0.1:5557","lora_name":"sql","block_size":32,"state":"degraded","last_seq":7,"lag_seconds":1.5,"blocks":10,"warnings":["block size mismatch"]}]},` +
				`{"instance_id":2,"endpoints":{"0":"tcp://10.0.0.2:5557","1":"tcp://10.0.0.2:5558"},"ranks":[` +
				`{"dp_rank":0,"model_name":"llama","tenant_id":"default","endpoint":"tcp://10.0.0.2:5557","replay_endpoint":"tcp://10.0.0.2:5600","serving_endpoint":"10.0.0.2:8000","block_size":16,"state":"exact","last_seq":41,"lag_seconds":0.25,"blocks":1234,"warnings":[]},` +
				`{"dp_rank":1,"model_name":"llama","tenant_id":"default","endpoint":"tcp://10.0.0.2:5558","block_size":16,"state":"recovering","last_seq":null,"lag_seconds":0,"blocks":0,"warnings":["no events yet"]}]}]`,
			wantCalls: []string{`Workers null`},
		},
		{
			name: "workers none", method: "GET", path: "/workers",
			wantStatus: 200, wantBody: `[]`, wantCalls: []string{`Workers null`},
		},
		{
			name: "query", method: "POST", path: "/query",
			body:       `{"token_ids":[1,2,3,4294967295],"model_name":"llama","tenant_id":"acme","lora_name":"sql","cache_salt":"s"}`,
			wantStatus: 200,
			wantBody:   `{"scores":{"1":{"0":32},"18446744073709551615":{"0":48,"1":16}},"frequencies":[2,2,1],"tree_sizes":{"1":{"0":5},"18446744073709551615":{"0":3,"1":4}}}`,
			wantCalls:  []string{`Query {"token_ids":[1,2,3,4294967295],"model_name":"llama","tenant_id":"acme","lora_name":"sql","cache_salt":"s"}`},
		},
		{
			name: "query empty tokens, empty answer as {} and []", method: "POST", path: "/query",
			body:       `{"token_ids":[],"model_name":"empty"}`,
			wantStatus: 200, wantBody: `{"scores":{},"frequencies":[],"tree_sizes":{}}`,
			wantCalls: []string{`Query {"token_ids":[],"model_name":"empty","tenant_id":"default"}`},
		},
		{
			name: "query_by_hash signed and unsigned spellings", method: "POST", path: "/query_by_hash",
			body:       `{"block_hashes":[` + maxU64 + `,-1,0,9223372036854775807,-9223372036854775808],"model_name":"llama"}`,
			wantStatus: 200,
			wantBody:   `{"scores":{"1":{"0":32},"18446744073709551615":{"0":48,"1":16}},"frequencies":[2,2,1],"tree_sizes":{"1":{"0":5},"18446744073709551615":{"0":3,"1":4}}}`,
			wantCalls:  []string{`QueryByHash {"block_hashes":[18446744073709551615,18446744073709551615,0,9223372036854775807,9223372036854775808],"model_name":"llama","tenant_id":"default"}`},
		},
		{
			name: "dump", method: "GET", path: "/dump",
			setup:      func(f *fakeBackend) { f.dumpNS, f.dumpEvts = fixtureDump() },
			wantStatus: 200, wantBody: strings.TrimSuffix(goldenDump, "\n"), wantCalls: []string{`Dump null`},
		},
		{
			name: "dump of an empty index", method: "GET", path: "/dump",
			wantStatus: 200, wantBody: `{}`, wantCalls: []string{`Dump null`},
		},
		{
			name: "route by tokens", method: "POST", path: "/route",
			body:       `{"token_ids":[1,2,3],"model_name":"llama","tenant_id":"acme","lora_name":"sql","cache_salt":"salt","session_id":"sess-1","request_id":"r-1"}`,
			wantStatus: 200,
			wantBody:   `{"worker_id":18446744073709551615,"dp_rank":1,"overlap_blocks":3,"cached_tokens":48,"request_id":"r-1"}`,
			wantCalls:  []string{`Route {"token_ids":[1,2,3],"model_name":"llama","tenant_id":"acme","lora_name":"sql","cache_salt":"salt","session_id":"sess-1","request_id":"r-1"}`},
		},
		{
			name: "route with session credit", method: "POST", path: "/route",
			body:       `{"token_ids":[1,2,3],"model_name":"llama","session_id":"sess-credit","request_id":"r-2"}`,
			wantStatus: 200,
			wantBody:   `{"worker_id":18446744073709551615,"dp_rank":1,"overlap_blocks":3,"cached_tokens":48,"session_credit_blocks":2,"request_id":"r-2"}`,
			wantCalls:  []string{`Route {"token_ids":[1,2,3],"model_name":"llama","tenant_id":"default","session_id":"sess-credit","request_id":"r-2"}`},
		},
		{
			name: "route by hashes with scores and a generated request id", method: "POST", path: "/route",
			body:       `{"block_hashes":[-2,7],"model_name":"llama","include_scores":true}`,
			wantStatus: 200,
			wantBody: `{"worker_id":18446744073709551615,"dp_rank":1,"overlap_blocks":3,"cached_tokens":48,"scores":[` +
				`{"worker_id":1,"dp_rank":0,"overlap_blocks":0,"active_prefill_tokens":100,"active_decode_blocks":7,"logit":73.25},` +
				`{"worker_id":18446744073709551615,"dp_rank":1,"overlap_blocks":3,"active_prefill_tokens":0,"active_decode_blocks":2,"logit":3.5,"degraded":true}],"request_id":"req-1"}`,
			wantCalls: []string{`Route {"block_hashes":[18446744073709551614,7],"model_name":"llama","tenant_id":"default","request_id":"req-1","include_scores":true}`},
		},
		{
			name: "route to a degraded worker, overlap per tier", method: "POST", path: "/route",
			body:       `{"token_ids":[5],"model_name":"degraded","request_id":"A.b_c~d:e-f","include_scores":false}`,
			wantStatus: 200,
			wantBody:   `{"worker_id":18446744073709551615,"dp_rank":1,"overlap_blocks":3,"cached_tokens":48,"overlap_by_tier":{"device":2,"host":1},"degraded":true,"request_id":"A.b_c~d:e-f"}`,
			wantCalls:  []string{`Route {"token_ids":[5],"model_name":"degraded","tenant_id":"default","request_id":"A.b_c~d:e-f"}`},
		},
		{
			name: "prefill_done", method: "POST", path: "/route/r-1/prefill_done",
			wantStatus: 200, wantBody: `{"status":"ok"}`, wantCalls: []string{`PrefillDone "r-1"`},
		},
		{
			name: "free", method: "POST", path: "/route/r-1/free",
			wantStatus: 200, wantBody: `{"status":"ok"}`, wantCalls: []string{`Free "r-1"`},
		},
		{
			name: "session", method: "GET", path: "/sessions/conv-1",
			wantStatus: 200,
			wantBody: `{"session_id":"conv-1","namespaces":[` +
				`{"model_name":"llama","tenant_id":"default","last_seen":"2026-11-03T10:04:05.25Z","lineages":[` +
				`{"worker_id":18446744073709551615,"dp_rank":1,"depth":3,"blocks":4,"newest_hash":18446744073709551615,"updated":"2026-11-03T10:04:05.25Z"}]},` +
				`{"model_name":"llama","tenant_id":"acme","last_seen":"2026-11-03T10:03:05.25Z","lineages":[]}]}`,
			wantCalls: []string{`Session {"session_id":"conv-1"}`},
		},
		{
			name: "session with its chain, escaped id", method: "GET", path: "/sessions/a%2Fb~c?chain=true",
			wantStatus: 200,
			wantBody: `{"session_id":"a/b~c","namespaces":[` +
				`{"model_name":"llama","tenant_id":"default","last_seen":"2026-11-03T10:04:05.25Z","lineages":[` +
				`{"worker_id":18446744073709551615,"dp_rank":1,"depth":3,"blocks":4,"newest_hash":18446744073709551615,"updated":"2026-11-03T10:04:05.25Z","chain":[7,8,18446744073709551615]}]},` +
				`{"model_name":"llama","tenant_id":"acme","last_seen":"2026-11-03T10:03:05.25Z","lineages":[]}]}`,
			wantCalls: []string{`Session {"session_id":"a/b~c","chain":true}`},
		},
		{
			name: "forget a session", method: "DELETE", path: "/sessions/conv-1",
			wantStatus: 200, wantBody: `{"status":"ok"}`, wantCalls: []string{`ForgetSession "conv-1"`},
		},
		{
			name: "healthz", method: "GET", path: "/healthz",
			wantStatus: 200, wantBody: `{"status":"ok"}`,
		},
		{
			name: "healthz HEAD", method: "HEAD", path: "/healthz",
			wantStatus: 200, wantBody: "",
		},
		{
			name: "readyz ready", method: "GET", path: "/readyz",
			wantStatus: 200, wantBody: `{"status":"ready"}`, wantCalls: []string{`Ready null`},
		},
		{
			name: "readyz not ready, reason shown", method: "GET", path: "/readyz",
			setup: func(f *fakeBackend) {
				f.ready = api.Errorf(api.ErrUnavailable, "recovering", "2 of 4 streams recovering")
			},
			wantStatus: 503, wantBody: `{"error":"2 of 4 streams recovering","reason":"recovering"}`,
			wantCalls: []string{`Ready null`},
		},
		{
			name: "readyz not ready, internal text hidden", method: "GET", path: "/readyz",
			setup:      func(f *fakeBackend) { f.ready = errors.New(leakyText) },
			wantStatus: 503, wantBody: `{"error":"not ready","reason":"not_ready"}`,
			wantCalls: []string{`Ready null`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fb, _ := newTestHandler(t, Options{})
			if tt.setup != nil {
				tt.setup(fb)
			}
			rec := do(h, tt.method, tt.path, tt.body)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if got := strings.TrimSuffix(rec.Body.String(), "\n"); got != tt.wantBody {
				t.Errorf("body\n got %s\nwant %s", got, tt.wantBody)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			if got := fb.takeCalls(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("backend calls\n got %q\nwant %q", got, tt.wantCalls)
			}
		})
	}
}

// TestGoldenMetrics pins the default /metrics text after a few requests.
func TestGoldenMetrics(t *testing.T) {
	h, _, _ := newTestHandler(t, Options{})
	do(h, "GET", "/healthz", "")
	do(h, "GET", "/healthz", "")
	do(h, "GET", "/nope", "")
	do(h, "GET", "/register", "")
	do(h, "POST", "/register", `{`)
	do(h, "POST", "/register", `{"instance_id":1,"endpoint":"tcp://a:1","model_name":"panic"}`)
	rec := do(h, "GET", "/metrics", "")
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	const want = `# HELP kvrouter_http_requests_total HTTP requests answered, by route path pattern and status code.
# TYPE kvrouter_http_requests_total counter
kvrouter_http_requests_total{path="/healthz",code="200"} 2
kvrouter_http_requests_total{path="/register",code="400"} 1
kvrouter_http_requests_total{path="/register",code="405"} 1
kvrouter_http_requests_total{path="/register",code="500"} 1
kvrouter_http_requests_total{path="other",code="404"} 1
# HELP kvrouter_http_panics_total Handler panics recovered and answered 500.
# TYPE kvrouter_http_panics_total counter
kvrouter_http_panics_total 1
# HELP kvrouter_http_requests_in_flight HTTP requests being answered.
# TYPE kvrouter_http_requests_in_flight gauge
kvrouter_http_requests_in_flight 1
`
	if got := rec.Body.String(); got != want {
		t.Errorf("metrics\n got:\n%s\nwant:\n%s", got, want)
	}
}

// TestMetricsHandlerOption: a caller's handler replaces the default and can
// still include the server's counters.
func TestMetricsHandlerOption(t *testing.T) {
	var h *Handler
	h, _, _ = newTestHandler(t, Options{MetricsHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("pipeline_events_total 5\n"))
		h.WriteMetrics(w)
	})})
	rec := do(h, "GET", "/metrics", "")
	body := rec.Body.String()
	if !strings.HasPrefix(body, "pipeline_events_total 5\n# HELP kvrouter_http_requests_total") {
		t.Errorf("body:\n%s", body)
	}
}
