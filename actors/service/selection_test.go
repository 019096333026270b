package service

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The selection service end to end over real engines' streams: a select
// answers the worker holding the prefix with its tier reach and books
// nothing; select_and_reserve books, and the lifecycle calls move the
// booking's load as GET /loads shows; the inspection endpoints answer
// every candidate; /query adds the per-instance breakdown on request.
func TestServeSelectionService(t *testing.T) {
	h := newHarness(t, 2)
	h.engines[0].Serve(prompt(1, 6), "")
	h.settle()
	tokens := append(prompt(1, 6), 7, 7, 7) // 6 cached blocks (24 tokens) and a tail: isl 27, 7 blocks

	expect := func(what string, code int, body []byte, wantCode int, want string) {
		t.Helper()
		if got := strings.TrimSpace(string(body)); code != wantCode || got != want {
			t.Errorf("%s: %d %s\nwant %d %s", what, code, got, wantCode, want)
		}
	}
	loads := func(w1 string) string {
		return `[{"model_name":"llama","routing_group":"default","loads":[` + w1 +
			`,{"worker_id":2,"dp_rank":0,"potential_prefill_tokens":0,"potential_decode_blocks":0,"active_requests":0}],"pending_count":0,"pending_isl_tokens":0}]`
	}
	idle := `{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":0,"potential_decode_blocks":0,"active_requests":0}`
	reach := `"overlap":{"longest_matched":24,"gpu":24,"dp":{"0":24},"cpu":24,"disk":24}`

	code, body := h.post("/select", map[string]any{"token_ids": tokens, "model_name": "llama", "advisory": true})
	expect("select", code, body, 200, `{"model_name":"llama","routing_group":"default","worker_id":1,"dp_rank":0,"endpoint":"","block_size":4,`+
		reach+`,"effective_prefill_tokens":3,"potential_decode_blocks":7,"worker_load":{"active_prefill_tokens":3,"prefill_token_capacity":0}}`)
	code, body = h.do("GET", "/loads")
	expect("loads after select", code, body, 200, loads(idle))

	code, body = h.post("/select_and_reserve", map[string]any{"token_ids": tokens, "model_name": "llama", "selection_id": "sel-1"})
	expect("select_and_reserve", code, body, 200, `{"selection_id":"sel-1","model_name":"llama","routing_group":"default","worker_id":1,"dp_rank":0,"endpoint":"","block_size":4,`+
		reach+`,"effective_prefill_tokens":3,"potential_decode_blocks":7}`)
	code, body = h.do("GET", "/loads?model_name=llama")
	expect("loads after the booking", code, body, 200, loads(`{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":3,"potential_decode_blocks":7,"active_requests":1}`))
	code, body = h.post("/select_and_reserve", map[string]any{"token_ids": tokens, "model_name": "llama", "selection_id": "sel-1"})
	expect("booking the id again", code, body, 409, `{"error":"request id \"sel-1\" is already routed","reason":"duplicate_request"}`)

	code, body = h.post("/potential_loads", map[string]any{"token_ids": tokens, "model_name": "llama"})
	expect("potential_loads", code, body, 200, `[{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":6,"potential_decode_blocks":14,"active_requests":1},`+
		`{"worker_id":2,"dp_rank":0,"potential_prefill_tokens":27,"potential_decode_blocks":7,"active_requests":0}]`)

	for range 2 {
		code, body = h.post("/reservations/sel-1/output_block", map[string]any{})
		expect("output_block", code, body, 200, `{"status":"ok"}`)
	}
	code, body = h.post("/reservations/sel-1/prefill_complete", nil)
	expect("prefill_complete", code, body, 200, `{"status":"ok"}`)
	code, body = h.do("GET", "/loads")
	expect("loads after two output blocks and prefill", code, body, 200, loads(`{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":0,"potential_decode_blocks":9,"active_requests":1}`))
	code, body = h.post("/reservations/sel-1/output_block", map[string]any{"decay_fraction": 0.5})
	expect("output_block with decay", code, body, 200, `{"status":"ok"}`)
	code, body = h.do("GET", "/loads")
	expect("loads after the decay (10 blocks held, 5 counted)", code, body, 200, loads(`{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":0,"potential_decode_blocks":5,"active_requests":1}`))

	code, body = h.do("DELETE", "/reservations/sel-1")
	expect("free", code, body, 200, `{"status":"ok"}`)
	code, body = h.do("GET", "/loads")
	expect("loads after free", code, body, 200, loads(idle))
	code, body = h.do("DELETE", "/reservations/sel-1")
	expect("free again", code, body, 404, `{"error":"request \"sel-1\" is not routed (or already freed or expired)","reason":"unknown_request"}`)
	code, body = h.post("/reservations/sel-1/output_block", nil)
	expect("output_block after free", code, body, 404, `{"error":"request \"sel-1\" is not routed (or already freed or expired)","reason":"unknown_request"}`)

	// Select, then reserve: the replay books what was selected, once; the
	// explicit form books the named worker with its own uncached prefill.
	h.post("/select", map[string]any{"token_ids": tokens, "model_name": "llama", "selection_id": "sel-2"})
	code, body = h.post("/reservations", map[string]any{"selection_id": "sel-2", "model_name": "llama"})
	expect("reserve (replay)", code, body, 201, `{"selection_id":"sel-2","model_name":"llama","routing_group":"default","worker_id":1,"dp_rank":0,"endpoint":""}`)
	code, body = h.post("/reservations", map[string]any{"selection_id": "sel-2", "model_name": "llama"})
	expect("reserve (replay) again", code, body, 404, `{"error":"no pending selection \"sel-2\" for model \"llama\", routing group \"default\" (expired, already booked, or never selected)","reason":"no_pending_selection"}`)
	code, body = h.post("/reservations", map[string]any{"selection_id": "sel-3", "model_name": "llama", "worker_id": 2, "token_ids": tokens})
	expect("reserve (explicit)", code, body, 201, `{"selection_id":"sel-3","model_name":"llama","routing_group":"default","worker_id":2,"dp_rank":0,"endpoint":""}`)
	code, body = h.post("/reservations", map[string]any{"selection_id": "sel-4", "model_name": "llama", "worker_id": 9, "token_ids": tokens})
	expect("reserve (explicit) on an unknown worker", code, body, 404, `{"error":"worker 9 dp_rank 0 is not registered for model \"llama\", routing group \"default\"","reason":"unknown_worker"}`)
	code, body = h.do("GET", "/loads")
	expect("loads after both reservations", code, body, 200, `[{"model_name":"llama","routing_group":"default","loads":[`+
		`{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":3,"potential_decode_blocks":7,"active_requests":1},`+
		`{"worker_id":2,"dp_rank":0,"potential_prefill_tokens":27,"potential_decode_blocks":7,"active_requests":1}],"pending_count":0,"pending_isl_tokens":0}]`)
	for _, id := range []string{"sel-2", "sel-3"} {
		h.do("DELETE", "/reservations/"+id)
	}

	code, body = h.post("/overlap_scores", map[string]any{"token_ids": tokens, "model_name": "llama"})
	expect("overlap_scores", code, body, 200, `{"block_size":4,"num_blocks":6,"workers":[`+
		`{"worker_id":1,"dp_rank":0,"device_blocks":6,"host_pinned_blocks":6,"disk_blocks":6,"host_pinned_extension_blocks":0,"disk_extension_blocks":0,"shared_beyond_device_blocks":null,"router_credit_blocks":6},`+
		`{"worker_id":2,"dp_rank":0,"device_blocks":0,"host_pinned_blocks":0,"disk_blocks":0,"host_pinned_extension_blocks":0,"disk_extension_blocks":0,"shared_beyond_device_blocks":null,"router_credit_blocks":0}],`+
		`"shared_cache":{"enabled":false,"total_hit_blocks":0,"ranges":[],"error":null}}`)

	code, body = h.post("/query", map[string]any{"token_ids": tokens, "model_name": "llama", "include_instances": true})
	var q struct {
		Scores    json.RawMessage `json:"scores"`
		Instances json.RawMessage `json:"instances"`
	}
	_ = json.Unmarshal(body, &q)
	if code != http.StatusOK || string(q.Scores) != `{"1":{"0":24}}` ||
		string(q.Instances) != `{"1":{"longest_matched":24,"gpu":24,"dp":{"0":24},"cpu":24,"disk":24},"2":{"longest_matched":0,"gpu":0,"dp":{"0":0},"cpu":0,"disk":0}}` {
		t.Errorf("query with instances: %d %s", code, body)
	}
	if code, body = h.post("/query", map[string]any{"token_ids": tokens, "model_name": "llama"}); strings.Contains(string(body), "instances") {
		t.Errorf("query without include_instances: %d %s", code, body)
	}
}
