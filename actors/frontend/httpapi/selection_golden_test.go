package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

// TestGoldenSelection pins every selection-service endpoint's answer byte
// for byte in the reference's shapes, its statuses, and what the Backend
// received.
func TestGoldenSelection(t *testing.T) {
	const maxU64 = "18446744073709551615"
	const selected = `"model_name":"llama","routing_group":"acme","worker_id":` + maxU64 + `,"dp_rank":1,"endpoint":"http://10.0.0.2:8000","block_size":16,` +
		`"overlap":{"longest_matched":128,"gpu":64,"dp":{"0":32,"1":64},"cpu":96,"disk":128},"effective_prefill_tokens":384,"potential_decode_blocks":40`
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantBody                 string
		wantCalls                []string
	}{
		{
			name: "select by tokens: advisory, not booked, no worker_load unless asked", method: "POST", path: "/select",
			body:       `{"token_ids":[1,2,3],"model_name":"llama","routing_group":"acme","selection_id":"select-123","priority_jump":2.5}`,
			wantStatus: 200, wantBody: `{"selection_id":"select-123",` + selected + `}`,
			wantCalls: []string{`Select {"token_ids":[1,2,3],"model_name":"llama","tenant_id":"acme","selection_id":"select-123"}`},
		},
		{
			name: "select advisory with worker_load, hashes form, former tenant_id name", method: "POST", path: "/select",
			body: `{"block_hashes":[11,-1],"sequence_hashes":[21,22],"isl_tokens":20,"model_name":"llama","tenant_id":"acme",
				"advisory":true,"session_context":{"session_id":"s-1","input_trigger":"user_message"},"session_id":"legacy"}`,
			wantStatus: 200, wantBody: `{` + selected + `,"worker_load":{"active_prefill_tokens":900,"prefill_token_capacity":0}}`,
			wantCalls: []string{`Select {"block_hashes":[11,18446744073709551615],"isl_tokens":20,"model_name":"llama","tenant_id":"acme","session_id":"s-1"}`},
		},
		{
			name: "select_and_reserve books under a drawn id; model and group default", method: "POST", path: "/select_and_reserve",
			body:       `{"token_ids":[1],"advisory":true}`,
			wantStatus: 200,
			wantBody: `{"selection_id":"req-1","model_name":"default","routing_group":"default","worker_id":` + maxU64 + `,"dp_rank":1,` +
				`"endpoint":"http://10.0.0.2:8000","block_size":16,"overlap":{"longest_matched":128,"gpu":64,"dp":{"0":32,"1":64},"cpu":96,"disk":128},` +
				`"effective_prefill_tokens":384,"potential_decode_blocks":40}`,
			wantCalls: []string{`Select {"token_ids":[1],"model_name":"default","tenant_id":"default","selection_id":"req-1","book":true}`},
		},
		{
			name: "select_and_reserve under the former reservation_id", method: "POST", path: "/select_and_reserve",
			body:       `{"token_ids":[1],"model_name":"llama","routing_group":"acme","reservation_id":"request-123"}`,
			wantStatus: 200, wantBody: `{"selection_id":"request-123",` + selected + `}`,
			wantCalls: []string{`Select {"token_ids":[1],"model_name":"llama","tenant_id":"acme","selection_id":"request-123","book":true}`},
		},
		{
			name: "select_and_reserve of a booked id", method: "POST", path: "/select_and_reserve",
			body:       `{"token_ids":[1],"model_name":"llama","selection_id":"dup"}`,
			wantStatus: 409, wantBody: `{"error":"request id \"dup\" is already routed","reason":"duplicate_request"}`,
			wantCalls: []string{`Select {"token_ids":[1],"model_name":"llama","tenant_id":"default","selection_id":"dup","book":true}`},
		},
		{
			name: "select in an unknown namespace", method: "POST", path: "/select",
			body:       `{"token_ids":[1],"model_name":"unknown"}`,
			wantStatus: 404, wantBody: `{"error":"no index for model=\"unknown\": not found","reason":"unknown_namespace"}`,
			wantCalls: []string{`Select {"token_ids":[1],"model_name":"unknown","tenant_id":"default"}`},
		},
		{
			name: "select with hashes but no isl_tokens", method: "POST", path: "/select",
			body:       `{"block_hashes":[1],"sequence_hashes":[2]}`,
			wantStatus: 400, wantBody: `{"error":"isl_tokens is required without token_ids","reason":"missing_field"}`,
		},
		{
			name: "select with unequal hash lists", method: "POST", path: "/select",
			body:       `{"block_hashes":[1,2],"sequence_hashes":[2],"isl_tokens":32}`,
			wantStatus: 400, wantBody: `{"error":"block_hashes length 2 must match sequence_hashes length 1","reason":"invalid_value"}`,
		},
		{
			name: "select pinned to a worker: refused, not ignored", method: "POST", path: "/select",
			body:       `{"token_ids":[1],"pinned_worker":{"worker_id":3,"dp_rank":0}}`,
			wantStatus: 400, wantBody: `{"error":"pinned_worker is not supported by kvrouter (it would change the choice); omit it","reason":"unsupported_field"}`,
		},
		{
			name: "routing_group and tenant_id that differ", method: "POST", path: "/select",
			body:       `{"token_ids":[1],"routing_group":"a","tenant_id":"b"}`,
			wantStatus: 400,
			wantBody:   `{"error":"routing_group \"a\" and tenant_id \"b\" differ: tenant_id is the former name of routing_group; send one","reason":"invalid_value"}`,
		},
		{
			name: "reservation, replay form: only the ids count", method: "POST", path: "/reservations",
			body:       `{"selection_id":"select-123","model_name":"llama","routing_group":"acme","isl_tokens":0}`,
			wantStatus: 201, wantBody: `{"selection_id":"select-123","model_name":"llama","routing_group":"acme","worker_id":1,"dp_rank":0,"endpoint":"http://10.0.0.2:8000"}`,
			wantCalls: []string{`Reserve {"model_name":"llama","tenant_id":"acme","selection_id":"select-123"}`},
		},
		{
			name: "reservation, explicit form with sequence hashes only", method: "POST", path: "/reservations",
			body: `{"selection_id":"request-123","model_name":"llama","worker_id":4,"dp_rank":1,
				"sequence_hashes":[21,22],"isl_tokens":32,"effective_prefill_tokens":16,"track_prefill_tokens":true}`,
			wantStatus: 201, wantBody: `{"selection_id":"request-123","model_name":"llama","routing_group":"default","worker_id":5,"dp_rank":1,"endpoint":"http://10.0.0.2:8000"}`,
			wantCalls: []string{`Reserve {"isl_tokens":32,"model_name":"llama","tenant_id":"default","selection_id":"request-123","explicit":true,"worker_id":4,"dp_rank":1,"effective_prefill_tokens":16,"has_effective":true}`},
		},
		{
			name: "reservation without an id", method: "POST", path: "/reservations",
			body:       `{"model_name":"llama"}`,
			wantStatus: 400, wantBody: `{"error":"selection_id is required","reason":"missing_field"}`,
		},
		{
			name: "reservation, explicit form without a prompt", method: "POST", path: "/reservations",
			body:       `{"selection_id":"a","worker_id":1}`,
			wantStatus: 400, wantBody: `{"error":"isl_tokens is required without token_ids","reason":"missing_field"}`,
		},
		{
			name: "reservation of a selection not pending", method: "POST", path: "/reservations",
			body:       `{"selection_id":"gone"}`,
			wantStatus: 404, wantBody: `{"error":"no pending selection \"gone\"","reason":"no_pending_selection"}`,
			wantCalls: []string{`Reserve {"model_name":"default","tenant_id":"default","selection_id":"gone"}`},
		},
		{
			name: "prefill_complete", method: "POST", path: "/reservations/select-123/prefill_complete",
			wantStatus: 200, wantBody: `{"status":"ok"}`,
			wantCalls: []string{`PrefillDone "select-123"`},
		},
		{
			name: "prefill_complete of an unknown reservation", method: "POST", path: "/reservations/nope/prefill_complete",
			wantStatus: 404, wantBody: `{"error":"request nope: not found","reason":"unknown_request"}`,
			wantCalls: []string{`PrefillDone "nope"`},
		},
		{
			name: "output_block without a body", method: "POST", path: "/reservations/select-123/output_block",
			wantStatus: 200, wantBody: `{"status":"ok"}`,
			wantCalls: []string{`OutputBlock {"id":"select-123"}`},
		},
		{
			name: "output_block with a decay fraction", method: "POST", path: "/reservations/select-123/output_block",
			body:       `{"decay_fraction":0.25}`,
			wantStatus: 200, wantBody: `{"status":"ok"}`,
			wantCalls: []string{`OutputBlock {"id":"select-123","decay_fraction":0.25,"has_decay":true}`},
		},
		{
			name: "output_block decay out of range", method: "POST", path: "/reservations/select-123/output_block",
			body:       `{"decay_fraction":1.5}`,
			wantStatus: 400, wantBody: `{"error":"decay_fraction must be between 0.0 and 1.0","reason":"invalid_value"}`,
		},
		{
			name: "output_block of an unknown reservation", method: "POST", path: "/reservations/nope/output_block",
			body:       `{}`,
			wantStatus: 404, wantBody: `{"error":"request nope: not found","reason":"unknown_request"}`,
			wantCalls: []string{`OutputBlock {"id":"nope"}`},
		},
		{
			name: "free", method: "DELETE", path: "/reservations/select-123",
			wantStatus: 200, wantBody: `{"status":"ok"}`,
			wantCalls: []string{`Free "select-123"`},
		},
		{
			name: "free of an unknown reservation", method: "DELETE", path: "/reservations/nope",
			wantStatus: 404, wantBody: `{"error":"request nope: not found","reason":"unknown_request"}`,
			wantCalls: []string{`Free "nope"`},
		},
		{
			name: "loads, filtered", method: "GET", path: "/loads?model_name=llama&routing_group=default",
			wantStatus: 200,
			wantBody: `[{"model_name":"llama","routing_group":"default","loads":[` +
				`{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":100,"potential_decode_blocks":7,"active_requests":2},` +
				`{"worker_id":2,"dp_rank":0,"potential_prefill_tokens":0,"potential_decode_blocks":0,"active_requests":0}],` +
				`"pending_count":0,"pending_isl_tokens":0},` +
				`{"model_name":"llama","routing_group":"acme","loads":[],"pending_count":0,"pending_isl_tokens":0}]`,
			wantCalls: []string{`Loads {"model_name":"llama","tenant_id":"default"}`},
		},
		{
			name: "loads, unfiltered, former tenant_id name", method: "GET", path: "/loads?tenant_id=acme",
			wantStatus: 200,
			wantBody: `[{"model_name":"llama","routing_group":"default","loads":[` +
				`{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":100,"potential_decode_blocks":7,"active_requests":2},` +
				`{"worker_id":2,"dp_rank":0,"potential_prefill_tokens":0,"potential_decode_blocks":0,"active_requests":0}],` +
				`"pending_count":0,"pending_isl_tokens":0},` +
				`{"model_name":"llama","routing_group":"acme","loads":[],"pending_count":0,"pending_isl_tokens":0}]`,
			wantCalls: []string{`Loads {"tenant_id":"acme"}`},
		},
		{
			name: "potential_loads", method: "POST", path: "/potential_loads",
			body:       `{"token_ids":[1,2],"model_name":"llama"}`,
			wantStatus: 200,
			wantBody: `[{"worker_id":1,"dp_rank":0,"potential_prefill_tokens":164,"potential_decode_blocks":12,"active_requests":2},` +
				`{"worker_id":2,"dp_rank":3,"potential_prefill_tokens":16,"potential_decode_blocks":5,"active_requests":0}]`,
			wantCalls: []string{`PotentialLoads {"token_ids":[1,2],"model_name":"llama","tenant_id":"default"}`},
		},
		{
			name: "overlap_scores", method: "POST", path: "/overlap_scores",
			body:       `{"token_ids":[1,2],"model_name":"llama","routing_group":"acme"}`,
			wantStatus: 200,
			wantBody: `{"block_size":16,"num_blocks":4,"workers":[` +
				`{"worker_id":1,"dp_rank":0,"device_blocks":1,"host_pinned_blocks":3,"disk_blocks":4,"host_pinned_extension_blocks":2,"disk_extension_blocks":1,"shared_beyond_device_blocks":null,"router_credit_blocks":4},` +
				`{"worker_id":2,"dp_rank":0,"device_blocks":0,"host_pinned_blocks":0,"disk_blocks":0,"host_pinned_extension_blocks":0,"disk_extension_blocks":0,"shared_beyond_device_blocks":null,"router_credit_blocks":0}],` +
				`"shared_cache":{"enabled":false,"total_hit_blocks":0,"ranges":[],"error":null}}`,
			wantCalls: []string{`OverlapScores {"token_ids":[1,2],"model_name":"llama","tenant_id":"acme"}`},
		},
		{
			name: "query with the per-instance tier breakdown beside today's answer", method: "POST", path: "/query",
			body:       `{"token_ids":[1,2,3],"model_name":"llama","include_instances":true}`,
			wantStatus: 200, wantBody: `{"scores":{"1":{"0":32},"` + maxU64 + `":{"0":48,"1":16}},"frequencies":[2,2,1],` +
				`"tree_sizes":{"1":{"0":5},"` + maxU64 + `":{"0":3,"1":4}},"instances":{` +
				`"1":{"longest_matched":48,"gpu":32,"dp":{"0":32},"cpu":48,"disk":48},` +
				`"` + maxU64 + `":{"longest_matched":48,"gpu":48,"dp":{"0":48,"1":16},"cpu":48,"disk":48},` +
				`"7":{"longest_matched":0,"gpu":0,"dp":{"0":0},"cpu":0,"disk":0}}}`,
			wantCalls: []string{`Query {"token_ids":[1,2,3],"model_name":"llama","tenant_id":"default","include_instances":true}`},
		},
		{
			name: "query_by_hash with the per-instance tier breakdown", method: "POST", path: "/query_by_hash",
			body:       `{"block_hashes":[5],"model_name":"llama","include_instances":true}`,
			wantStatus: 200, wantBody: `{"scores":{"1":{"0":32},"` + maxU64 + `":{"0":48,"1":16}},"frequencies":[2,2,1],` +
				`"tree_sizes":{"1":{"0":5},"` + maxU64 + `":{"0":3,"1":4}},"instances":{` +
				`"1":{"longest_matched":48,"gpu":32,"dp":{"0":32},"cpu":48,"disk":48},` +
				`"` + maxU64 + `":{"longest_matched":48,"gpu":48,"dp":{"0":48,"1":16},"cpu":48,"disk":48},` +
				`"7":{"longest_matched":0,"gpu":0,"dp":{"0":0},"cpu":0,"disk":0}}}`,
			wantCalls: []string{`QueryByHash {"block_hashes":[5],"model_name":"llama","tenant_id":"default","include_instances":true}`},
		},
		{
			name: "wrong method on a reservation", method: "GET", path: "/reservations/select-123",
			wantStatus: 405, wantBody: `{"error":"GET is not allowed on /reservations/{request_id} (allowed: DELETE)","reason":"method_not_allowed"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fb, _ := newTestHandler(t, Options{})
			rec := do(h, tt.method, tt.path, tt.body)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if got := strings.TrimSuffix(rec.Body.String(), "\n"); got != tt.wantBody {
				t.Errorf("body\n got %s\nwant %s", got, tt.wantBody)
			}
			if got := fb.takeCalls(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("backend calls\n got %q\nwant %q", got, tt.wantCalls)
			}
		})
	}
}

// Without a selection service in the Backend the endpoints answer 501,
// and the booking endpoints need the token like /route's.
func TestSelectionNotImplementedAndAuth(t *testing.T) {
	h := New(plainBackend{&fakeBackend{}}, Options{APIToken: "s3cret"})
	rec := do(h, "POST", "/select", `{"token_ids":[1]}`)
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), `"reason":"not_implemented"`) {
		t.Errorf("no selector: %d %s", rec.Code, rec.Body)
	}
	for _, p := range []string{"/select_and_reserve", "/reservations/a/prefill_complete", "/reservations/a/output_block"} {
		if rec := do(h, "POST", p, `{}`); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", p, rec.Code)
		}
	}
	if rec := do(h, "DELETE", "/reservations/a", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("DELETE without the token: %d", rec.Code)
	}
}

// plainBackend hides the fake's selection service.
type plainBackend struct{ api.Backend }
