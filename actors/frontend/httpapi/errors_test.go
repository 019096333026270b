package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

type badCase struct {
	name       string
	method     string
	path       string
	body       string
	hdr        []string
	opts       Options
	chunked    bool // send the body without a Content-Length
	setup      func(*fakeBackend)
	byBackend  bool // a 4xx the api.Backend answers (the server cannot tell)
	wantStatus int
	wantReason string
}

// A valid body per JSON endpoint; the generic cases below break it.
var validBodies = map[string]string{
	"/register":      `{"instance_id":1,"endpoint":"tcp://10.0.0.1:5557","model_name":"llama"}`,
	"/unregister":    `{"instance_id":1,"model_name":"llama"}`,
	"/query":         `{"token_ids":[1,2],"model_name":"llama"}`,
	"/query_by_hash": `{"block_hashes":[1,2],"model_name":"llama"}`,
	"/route":         `{"token_ids":[1,2],"model_name":"llama"}`,
}

const token = "s3cret-token"

// genericCases applies to every JSON POST endpoint.
func genericCases(path string, protected bool) []badCase {
	valid := validBodies[path]
	const bodyCap = 64 << 10
	capped := Options{MaxBodyBytes: bodyCap}
	huge := `{"model_name":"` + strings.Repeat("a", bodyCap) + `"}`
	cs := []badCase{
		{name: "truncated JSON", body: `{"instance_id":`, wantStatus: 400, wantReason: "bad_json"},
		{name: "not JSON", body: `hello`, wantStatus: 400, wantReason: "bad_json"},
		{name: "syntax error", body: `{"model_name":"x",}`, wantStatus: 400, wantReason: "bad_json"},
		{name: "array body", body: `[1,2]`, wantStatus: 400, wantReason: "bad_json"},
		{name: "string body", body: `"x"`, wantStatus: 400, wantReason: "bad_json"},
		{name: "null body", body: `null`, wantStatus: 400, wantReason: "missing_field"},
		{name: "empty body", body: ``, hdr: []string{"Content-Type", "application/json"}, wantStatus: 400, wantReason: "bad_json"},
		{name: "empty object", body: `{}`, wantStatus: 400, wantReason: "missing_field"},
		{name: "trailing data", body: valid + ` {}`, wantStatus: 400, wantReason: "bad_json"},
		{name: "trailing garbage", body: valid + `x`, wantStatus: 400, wantReason: "bad_json"},
		{name: "text/plain", body: valid, hdr: []string{"Content-Type", "text/plain"}, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "form", body: valid, hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "no Content-Type", body: valid, hdr: []string{"Content-Type", ""}, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "huge body", body: huge, opts: capped, wantStatus: 413, wantReason: "body_too_large"},
		{name: "huge body chunked", body: huge, opts: capped, chunked: true, wantStatus: 413, wantReason: "body_too_large"},
		{name: "valid JSON then huge trailer chunked", body: valid + strings.Repeat(" ", bodyCap), opts: capped, chunked: true, wantStatus: 413, wantReason: "body_too_large"},
		{name: "small body cap", body: valid, opts: Options{MaxBodyBytes: 10}, wantStatus: 413, wantReason: "body_too_large"},
		{name: "GET", method: "GET", wantStatus: 405, wantReason: "method_not_allowed"},
		{name: "PUT", method: "PUT", body: valid, wantStatus: 405, wantReason: "method_not_allowed"},
		{name: "DELETE", method: "DELETE", wantStatus: 405, wantReason: "method_not_allowed"},
		{name: "trailing slash", path: path + "/", body: valid, wantStatus: 404, wantReason: "not_found"},
	}
	auth := Options{APIToken: token, ProtectReads: true}
	if protected {
		cs = append(cs,
			badCase{name: "token missing", body: valid, opts: auth, wantStatus: 401, wantReason: "missing_token"},
			badCase{name: "token wrong", body: valid, opts: auth, hdr: []string{"Authorization", "Bearer nope"}, wantStatus: 401, wantReason: "invalid_token"},
			badCase{name: "token prefix", body: valid, opts: auth, hdr: []string{"Authorization", "Bearer " + token[:5]}, wantStatus: 401, wantReason: "invalid_token"},
			badCase{name: "token longer", body: valid, opts: auth, hdr: []string{"Authorization", "Bearer " + token + "x"}, wantStatus: 401, wantReason: "invalid_token"},
			badCase{name: "basic auth", body: valid, opts: auth, hdr: []string{"Authorization", "Basic " + token}, wantStatus: 401, wantReason: "missing_token"},
			badCase{name: "bare token", body: valid, opts: auth, hdr: []string{"Authorization", token}, wantStatus: 401, wantReason: "missing_token"},
			badCase{name: "auth before body checks", body: `{`, opts: auth, wantStatus: 401, wantReason: "missing_token"},
		)
	}
	for i := range cs {
		cs[i].name = path + " " + cs[i].name
		if cs[i].method == "" {
			cs[i].method = "POST"
		}
		if cs[i].path == "" {
			cs[i].path = path
		}
	}
	return cs
}

// getCases applies to every GET endpoint.
func getCases(path string, protected bool) []badCase {
	cs := []badCase{
		{name: "POST", method: "POST", body: `{}`, wantStatus: 405, wantReason: "method_not_allowed"},
		{name: "PUT", method: "PUT", wantStatus: 405, wantReason: "method_not_allowed"},
		{name: "DELETE", method: "DELETE", wantStatus: 405, wantReason: "method_not_allowed"},
		{name: "trailing slash", method: "GET", path: path + "/", wantStatus: 404, wantReason: "not_found"},
	}
	if protected {
		auth := Options{APIToken: token, ProtectReads: true}
		cs = append(cs,
			badCase{name: "token missing", method: "GET", opts: auth, wantStatus: 401, wantReason: "missing_token"},
			badCase{name: "token wrong", method: "GET", opts: auth, hdr: []string{"Authorization", "Bearer x"}, wantStatus: 401, wantReason: "invalid_token"},
		)
	}
	for i := range cs {
		cs[i].name = path + " " + cs[i].name
		if cs[i].path == "" {
			cs[i].path = path
		}
	}
	return cs
}

// bookkeepingCases applies to /route/{id}/prefill_done and /free.
func bookkeepingCases(verb string) []badCase {
	p := func(id string) string { return "/route/" + id + "/" + verb }
	auth := Options{APIToken: token}
	cs := []badCase{
		{name: "unknown request", method: "POST", path: p("nope"), wantStatus: 404, wantReason: "unknown_request"},
		{name: "id with a space", method: "POST", path: p("a%20b"), wantStatus: 400, wantReason: "invalid_value"},
		{name: "id with a slash", method: "POST", path: p("a%2Fb"), wantStatus: 400, wantReason: "invalid_value"},
		{name: "id too long", method: "POST", path: p(strings.Repeat("a", 129)), wantStatus: 400, wantReason: "invalid_value"},
		{name: "backend timeout", method: "POST", path: p("slow"), wantStatus: 503, wantReason: "timeout"},
		{name: "GET", method: "GET", path: p("r-1"), wantStatus: 405, wantReason: "method_not_allowed"},
		{name: "DELETE", method: "DELETE", path: p("r-1"), wantStatus: 405, wantReason: "method_not_allowed"},
		{name: "extra segment", method: "POST", path: p("r-1") + "/x", wantStatus: 404, wantReason: "not_found"},
		{name: "token missing", method: "POST", path: p("r-1"), opts: auth, wantStatus: 401, wantReason: "missing_token"},
		{name: "token wrong", method: "POST", path: p("r-1"), opts: auth, hdr: []string{"Authorization", "Bearer x"}, wantStatus: 401, wantReason: "invalid_token"},
	}
	for i := range cs {
		cs[i].name = "/route/{id}/" + verb + " " + cs[i].name
	}
	return cs
}

func post(path, body string, status int, reason string) badCase {
	return badCase{name: path + " " + body, method: "POST", path: path, body: body, wantStatus: status, wantReason: reason}
}

func badCases() []badCase {
	var cs []badCase
	cs = append(cs, genericCases("/register", true)...)
	cs = append(cs, genericCases("/unregister", true)...)
	cs = append(cs, genericCases("/query", true)...)
	cs = append(cs, genericCases("/query_by_hash", true)...)
	cs = append(cs, genericCases("/route", true)...)
	for _, p := range []string{"/workers", "/dump", "/metrics"} {
		cs = append(cs, getCases(p, true)...)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		cs = append(cs, getCases(p, false)...)
	}
	cs = append(cs, bookkeepingCases("prefill_done")...)
	cs = append(cs, bookkeepingCases("free")...)

	const ep = `"endpoint":"tcp://10.0.0.1:5557"`
	reg := func(fields string, status int, reason string) badCase {
		return post("/register", "{"+fields+"}", status, reason)
	}
	long := strings.Repeat("m", maxStringBytes+1)
	cs = append(cs,
		reg(`"endpoint":"tcp://a:1","model_name":"llama"`, 400, "missing_field"),
		reg(`"instance_id":null,`+ep+`,"model_name":"llama"`, 400, "missing_field"),
		reg(`"instance_id":"1",`+ep+`,"model_name":"llama"`, 400, "wrong_type"),
		reg(`"instance_id":true,`+ep+`,"model_name":"llama"`, 400, "wrong_type"),
		reg(`"instance_id":[1],`+ep+`,"model_name":"llama"`, 400, "wrong_type"),
		reg(`"instance_id":-1,`+ep+`,"model_name":"llama"`, 400, "negative_number"),
		reg(`"instance_id":1.5,`+ep+`,"model_name":"llama"`, 400, "not_an_integer"),
		reg(`"instance_id":1.0,`+ep+`,"model_name":"llama"`, 400, "not_an_integer"),
		reg(`"instance_id":1e3,`+ep+`,"model_name":"llama"`, 400, "not_an_integer"),
		reg(`"instance_id":-1.5,`+ep+`,"model_name":"llama"`, 400, "not_an_integer"),
		reg(`"instance_id":18446744073709551616,`+ep+`,"model_name":"llama"`, 400, "out_of_range"),
		reg(`"instance_id":1,"model_name":"llama"`, 400, "missing_field"),
		reg(`"instance_id":1,"endpoint":"","model_name":"llama"`, 400, "missing_field"),
		reg(`"instance_id":1,"endpoint":5,"model_name":"llama"`, 400, "wrong_type"),
		reg(`"instance_id":1,"endpoint":"10.0.0.1:5557","model_name":"llama"`, 400, "invalid_value"),
		reg(`"instance_id":1,"endpoint":"tcp://","model_name":"llama"`, 400, "invalid_value"),
		reg(`"instance_id":1,"endpoint":"tcp://a b:1","model_name":"llama"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep, 400, "missing_field"),
		reg(`"instance_id":1,`+ep+`,"model_name":""`, 400, "missing_field"),
		reg(`"instance_id":1,`+ep+`,"model_name":5`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"a\nb"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"`+long+`"`, 400, "too_long"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","tenant_id":7`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","tenant_id":"a\u0000b"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","block_size":0`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","block_size":-16`, 400, "negative_number"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","block_size":16.5`, 400, "not_an_integer"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","block_size":4294967296`, 400, "out_of_range"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","block_size":"16"`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","dp_rank":-1`, 400, "negative_number"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","dp_rank":"0"`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","lora_name":["a"]`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","replay_endpoint":"nope"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","serving_endpoint":"tcp://h:1"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","serving_endpoint":"h"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","events":"nats"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","events":3`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","events":"none"`, 400, "invalid_value"),
		reg(`"instance_id":1,"model_name":"llama","events":"none","replay_endpoint":"tcp://h:2"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","cache_blocks":64`, 400, "invalid_value"),
		reg(`"instance_id":1,"model_name":"llama","events":"none","cache_blocks":0`, 400, "invalid_value"),
		reg(`"instance_id":1,"model_name":"llama","events":"none","cache_blocks":-4`, 400, "negative_number"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","serving_endpoint":7`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","engine":"llamacpp"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","engine":7`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","role":"encode"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","role":1`, 400, "wrong_type"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","bootstrap_host":"h:8998"`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","bootstrap_port":0`, 400, "invalid_value"),
		reg(`"instance_id":1,`+ep+`,"model_name":"llama","bootstrap_port":70000`, 400, "wrong_type"),
		reg(`"instance_id":7,`+ep+`,"model_name":"llama"`, 409, "already_registered"),
		reg(`"instance_id":1,`+ep+`,"model_name":"mismatch","block_size":16`, 409, "block_size_mismatch"),
		reg(`"instance_id":1,`+ep+`,"model_name":"boom"`, 500, "internal"),
		reg(`"instance_id":1,`+ep+`,"model_name":"panic"`, 500, "internal"),
		reg(`"instance_id":1,`+ep+`,"model_name":"busy"`, 503, "no_workers"),
	)

	unreg := func(fields string, status int, reason string) badCase {
		return post("/unregister", "{"+fields+"}", status, reason)
	}
	cs = append(cs,
		unreg(`"model_name":"llama"`, 400, "missing_field"),
		unreg(`"instance_id":1`, 400, "missing_field"),
		unreg(`"instance_id":"1","model_name":"llama"`, 400, "wrong_type"),
		unreg(`"instance_id":-3,"model_name":"llama"`, 400, "negative_number"),
		unreg(`"instance_id":3.0,"model_name":"llama"`, 400, "not_an_integer"),
		unreg(`"instance_id":1,"model_name":"llama","dp_rank":-1`, 400, "negative_number"),
		unreg(`"instance_id":1,"model_name":"llama","dp_rank":4294967296`, 400, "out_of_range"),
		unreg(`"instance_id":1,"model_name":"llama","tenant_id":false`, 400, "wrong_type"),
		unreg(`"instance_id":99,"model_name":"llama"`, 404, "unknown_worker"),
		unreg(`"instance_id":1,"model_name":"boom"`, 500, "internal"),
	)

	tooManyTokens := "[" + strings.Repeat("0,", DefaultMaxPromptTokens) + "0]"
	query := func(fields string, status int, reason string) badCase {
		return post("/query", "{"+fields+"}", status, reason)
	}
	cs = append(cs,
		query(`"model_name":"llama"`, 400, "missing_field"),
		query(`"token_ids":null,"model_name":"llama"`, 400, "missing_field"),
		query(`"token_ids":[1]`, 400, "missing_field"),
		query(`"token_ids":"1 2 3","model_name":"llama"`, 400, "wrong_type"),
		query(`"token_ids":{"0":1},"model_name":"llama"`, 400, "wrong_type"),
		query(`"token_ids":5,"model_name":"llama"`, 400, "wrong_type"),
		query(`"token_ids":[1,"2"],"model_name":"llama"`, 400, "wrong_type"),
		query(`"token_ids":[1,null],"model_name":"llama"`, 400, "wrong_type"),
		query(`"token_ids":[[1]],"model_name":"llama"`, 400, "wrong_type"),
		query(`"token_ids":[1,-2],"model_name":"llama"`, 400, "negative_number"),
		query(`"token_ids":[1,2.5],"model_name":"llama"`, 400, "not_an_integer"),
		query(`"token_ids":[4294967296],"model_name":"llama"`, 400, "out_of_range"),
		query(`"token_ids":`+tooManyTokens+`,"model_name":"llama"`, 413, "too_many_tokens"),
		query(`"token_ids":[1],"model_name":"llama","lora_name":5`, 400, "wrong_type"),
		query(`"token_ids":[1],"model_name":"llama","cache_salt":{}`, 400, "wrong_type"),
		query(`"token_ids":[1],"model_name":"unknown"`, 404, "unknown_namespace"),
		query(`"token_ids":[1],"model_name":"boom"`, 500, "internal"),
		query(`"token_ids":[1],"model_name":"panic"`, 500, "internal"),
	)

	tooManyHashes := "[" + strings.Repeat("1,", DefaultMaxBlockHashes) + "1]"
	qbh := func(fields string, status int, reason string) badCase {
		return post("/query_by_hash", "{"+fields+"}", status, reason)
	}
	cs = append(cs,
		qbh(`"model_name":"llama"`, 400, "missing_field"),
		qbh(`"block_hashes":[1]`, 400, "missing_field"),
		qbh(`"block_hashes":"1","model_name":"llama"`, 400, "wrong_type"),
		qbh(`"block_hashes":1,"model_name":"llama"`, 400, "wrong_type"),
		qbh(`"block_hashes":["1"],"model_name":"llama"`, 400, "wrong_type"),
		qbh(`"block_hashes":[null],"model_name":"llama"`, 400, "wrong_type"),
		qbh(`"block_hashes":[true],"model_name":"llama"`, 400, "wrong_type"),
		qbh(`"block_hashes":[1.5],"model_name":"llama"`, 400, "not_an_integer"),
		qbh(`"block_hashes":[1e19],"model_name":"llama"`, 400, "not_an_integer"),
		qbh(`"block_hashes":[18446744073709551616],"model_name":"llama"`, 400, "out_of_range"),
		qbh(`"block_hashes":[-9223372036854775809],"model_name":"llama"`, 400, "out_of_range"),
		qbh(`"block_hashes":`+tooManyHashes+`,"model_name":"llama"`, 413, "too_many_block_hashes"),
		qbh(`"block_hashes":[1],"model_name":"unknown"`, 404, "unknown_namespace"),
		qbh(`"block_hashes":[1],"model_name":"boom"`, 500, "internal"),
	)

	route := func(fields string, status int, reason string) badCase {
		return post("/route", "{"+fields+"}", status, reason)
	}
	cs = append(cs,
		route(`"token_ids":[1],"model_name":"llama","sesion_id":"x"`, 400, "unknown_field"),
		route(`"token_ids":[1],"model_name":"llama","medium":["L1"]`, 400, "unknown_field"),
		route(`"model_name":"llama"`, 400, "missing_field"),
		route(`"token_ids":null,"block_hashes":null,"model_name":"llama"`, 400, "missing_field"),
		route(`"token_ids":[1]`, 400, "missing_field"),
		route(`"token_ids":[1],"block_hashes":[1],"model_name":"llama"`, 400, "invalid_value"),
		route(`"block_hashes":[1],"model_name":"llama","lora_name":"sql"`, 400, "invalid_value"),
		route(`"block_hashes":[1],"model_name":"llama","cache_salt":"s"`, 400, "invalid_value"),
		route(`"token_ids":[-1],"model_name":"llama"`, 400, "negative_number"),
		route(`"token_ids":[0.5],"model_name":"llama"`, 400, "not_an_integer"),
		route(`"token_ids":[4294967296],"model_name":"llama"`, 400, "out_of_range"),
		route(`"token_ids":["a"],"model_name":"llama"`, 400, "wrong_type"),
		route(`"block_hashes":[1.0],"model_name":"llama"`, 400, "not_an_integer"),
		route(`"block_hashes":{},"model_name":"llama"`, 400, "wrong_type"),
		route(`"token_ids":`+tooManyTokens+`,"model_name":"llama"`, 413, "too_many_tokens"),
		route(`"block_hashes":`+tooManyHashes+`,"model_name":"llama"`, 413, "too_many_block_hashes"),
		route(`"token_ids":[1],"model_name":"llama","request_id":"a/b"`, 400, "invalid_value"),
		route(`"token_ids":[1],"model_name":"llama","request_id":"`+strings.Repeat("r", 129)+`"`, 400, "invalid_value"),
		route(`"token_ids":[1],"model_name":"llama","request_id":5`, 400, "wrong_type"),
		route(`"token_ids":[1],"model_name":"llama","include_scores":"yes"`, 400, "wrong_type"),
		route(`"token_ids":[1],"model_name":"llama","include_scores":1`, 400, "wrong_type"),
		route(`"token_ids":[1],"model_name":"llama","session_id":5`, 400, "wrong_type"),
		route(`"token_ids":[1],"model_name":"llama","session_id":"`+long+`"`, 400, "too_long"),
		route(`"token_ids":[1],"model_name":"unknown"`, 404, "unknown_namespace"),
		route(`"token_ids":[1],"model_name":"llama","request_id":"dup"`, 409, "duplicate_request_id"),
		route(`"token_ids":[1],"model_name":"busy"`, 503, "no_workers"),
		route(`"token_ids":[1],"model_name":"boom"`, 500, "internal"),
		route(`"token_ids":[1],"model_name":"panic"`, 500, "internal"),
		route(`"token_ids":[1],"model_name":"nan"`, 500, "internal"),
	)

	cs = append(cs,
		badCase{name: "/workers backend error", method: "GET", path: "/workers",
			setup: func(f *fakeBackend) { f.workErr = fmt.Errorf("listing: %s", leakyText) }, wantStatus: 500, wantReason: "internal"},
		badCase{name: "/workers backend unavailable", method: "GET", path: "/workers",
			setup: func(f *fakeBackend) { f.workErr = api.ErrUnavailable }, wantStatus: 503, wantReason: "unavailable"},
		badCase{name: "/dump backend error before output", method: "GET", path: "/dump",
			setup: func(f *fakeBackend) {
				f.dump = func(_ context.Context, sink api.DumpSink) error { return fmt.Errorf("snapshot: %s", leakyText) }
			}, wantStatus: 500, wantReason: "internal"},
		badCase{name: "/dump backend unavailable", method: "GET", path: "/dump",
			setup: func(f *fakeBackend) {
				f.dump = func(_ context.Context, sink api.DumpSink) error {
					return api.Errorf(api.ErrUnavailable, "recovering", "bootstrapping")
				}
			}, wantStatus: 503, wantReason: "recovering"},
		badCase{name: "/dump backend breaks the sink contract", method: "GET", path: "/dump",
			setup: func(f *fakeBackend) {
				f.dump = func(_ context.Context, sink api.DumpSink) error {
					return sink.Event(fixtureEvent())
				}
			}, wantStatus: 500, wantReason: "internal"},
		badCase{name: "/readyz not ready", method: "GET", path: "/readyz",
			setup: func(f *fakeBackend) { f.ready = api.ErrUnavailable }, wantStatus: 503, wantReason: "not_ready"},
		badCase{name: "unknown path", method: "GET", path: "/nope", wantStatus: 404, wantReason: "not_found"},
		badCase{name: "unknown path POST", method: "POST", path: "/v1/route", body: `{}`, wantStatus: 404, wantReason: "not_found"},
		badCase{name: "/route without id", method: "POST", path: "/route/free", wantStatus: 404, wantReason: "not_found"},
	)

	auth := Options{APIToken: token, ProtectReads: true}
	for _, m := range []string{"GET", "DELETE"} {
		cs = append(cs,
			badCase{name: m + " /sessions unknown", method: m, path: "/sessions/gone", wantStatus: 404, wantReason: "unknown_session"},
			badCase{name: m + " /sessions invalid id", method: m, path: "/sessions/bad", byBackend: true, wantStatus: 400, wantReason: "invalid_session_id"},
			badCase{name: m + " /sessions backend error", method: m, path: "/sessions/boom", wantStatus: 500, wantReason: "internal"},
			badCase{name: m + " /sessions token missing", method: m, path: "/sessions/s", opts: auth, wantStatus: 401, wantReason: "missing_token"},
			badCase{name: m + " /sessions without id", method: m, path: "/sessions/", wantStatus: 404, wantReason: "not_found"},
			badCase{name: m + " /sessions nested path", method: m, path: "/sessions/a/b", wantStatus: 404, wantReason: "not_found"},
		)
	}
	cs = append(cs,
		badCase{name: "/sessions chain not a boolean", method: "GET", path: "/sessions/s?chain=maybe", wantStatus: 400, wantReason: "invalid_value"},
		badCase{name: "/sessions POST", method: "POST", path: "/sessions/s", body: `{}`, wantStatus: 405, wantReason: "method_not_allowed"},
		badCase{name: "/sessions PUT", method: "PUT", path: "/sessions/s", wantStatus: 405, wantReason: "method_not_allowed"},
	)
	return cs
}

// TestBadInputs: every bad input gets its status, a JSON error body with
// the expected reason, and nothing internal.
func TestBadInputs(t *testing.T) {
	cases := badCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, fb, logs := newTestHandler(t, tc.opts)
			if tc.setup != nil {
				tc.setup(fb)
			}
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			if tc.chunked {
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.wantStatus, clip(rec.Body.String()))
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var body map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q is not {error, reason}: %v", rec.Body, err)
			}
			if body["reason"] != tc.wantReason || body["error"] == "" || len(body) != 2 {
				t.Errorf("body %v, want reason %q and an error text", body, tc.wantReason)
			}
			if s := rec.Body.String(); strings.Contains(s, "10.9.8.7") || strings.Contains(s, "hunter2") {
				t.Errorf("internal detail leaked: %s", s)
			}
			calls := fb.takeCalls()
			switch rec.Code {
			case 405:
				if rec.Header().Get("Allow") == "" {
					t.Error("405 without Allow")
				}
			case 401:
				if !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), `Bearer realm="kvrouter"`) {
					t.Errorf("WWW-Authenticate %q", rec.Header().Get("WWW-Authenticate"))
				}
			case 500:
				if l := logs.String(); !strings.Contains(l, "kaboom") && !strings.Contains(l, "10.9.8.7") &&
					!strings.Contains(l, "NaN") && !strings.Contains(l, "dump:") {
					t.Errorf("500 without the details in the log: %s", l)
				}
			}
			// Input the server rejects itself never reaches the Backend.
			switch {
			case tc.byBackend:
			case rec.Code == 400, rec.Code == 401, rec.Code == 405, rec.Code == 413, rec.Code == 415,
				tc.wantReason == "not_found":
				if len(calls) != 0 {
					t.Errorf("backend called: %v", calls)
				}
			}
		})
	}
	t.Logf("%d bad-input cases", len(cases))
}

// TestAuthAllowed: the right token passes everywhere; without
// ProtectReads reads are open; probes are always open.
func TestAuthAllowed(t *testing.T) {
	bearer := []string{"Authorization", "Bearer " + token}
	for _, tc := range []struct {
		opts   Options
		method string
		path   string
		body   string
		hdr    []string
		want   int
	}{
		{Options{APIToken: token}, "POST", "/register", validBodies["/register"], bearer, 201},
		{Options{APIToken: token}, "POST", "/register", validBodies["/register"], []string{"Authorization", "bearer  " + token + " "}, 201},
		{Options{APIToken: token}, "POST", "/unregister", validBodies["/unregister"], bearer, 200},
		{Options{APIToken: token}, "POST", "/route", validBodies["/route"], bearer, 200},
		{Options{APIToken: token}, "POST", "/route/r/free", "", bearer, 200},
		{Options{APIToken: token}, "POST", "/route/r/prefill_done", "", bearer, 200},
		{Options{APIToken: token}, "POST", "/query", validBodies["/query"], nil, 200},
		{Options{APIToken: token}, "POST", "/query_by_hash", validBodies["/query_by_hash"], nil, 200},
		{Options{APIToken: token}, "GET", "/workers", "", nil, 200},
		{Options{APIToken: token}, "GET", "/dump", "", nil, 200},
		{Options{APIToken: token}, "GET", "/metrics", "", nil, 200},
		{Options{APIToken: token, ProtectReads: true}, "POST", "/query", validBodies["/query"], bearer, 200},
		{Options{APIToken: token, ProtectReads: true}, "GET", "/dump", "", bearer, 200},
		{Options{APIToken: token, ProtectReads: true}, "GET", "/healthz", "", nil, 200},
		{Options{APIToken: token, ProtectReads: true}, "GET", "/readyz", "", nil, 200},
		{Options{}, "POST", "/route", validBodies["/route"], []string{"Authorization", "Bearer whatever"}, 200},
		{Options{APIToken: token}, "GET", "/sessions/s", "", nil, 200},
		{Options{APIToken: token}, "DELETE", "/sessions/s", "", bearer, 200},
		{Options{APIToken: token, ProtectReads: true}, "GET", "/sessions/s", "", bearer, 200},
	} {
		h, _, _ := newTestHandler(t, tc.opts)
		rec := do(h, tc.method, tc.path, tc.body, tc.hdr...)
		if rec.Code != tc.want {
			t.Errorf("%s %s %v: status %d, want %d (%s)", tc.method, tc.path, tc.hdr, rec.Code, tc.want, rec.Body)
		}
	}
}

// TestAllowHeader: 405 lists the endpoint's method.
func TestAllowHeader(t *testing.T) {
	h, _, _ := newTestHandler(t, Options{})
	for path, want := range map[string]string{"/register": "POST", "/workers": "GET, HEAD", "/route/x/free": "POST",
		"/sessions/x": "GET, HEAD, DELETE"} {
		rec := do(h, "PATCH", path, "")
		if got := rec.Header().Get("Allow"); rec.Code != http.StatusMethodNotAllowed || got != want {
			t.Errorf("%s: status %d Allow %q, want 405 %q", path, rec.Code, got, want)
		}
	}
}

func fixtureEvent() messages.RouterEvent {
	_, evs := fixtureDump()
	return evs[0][0]
}
