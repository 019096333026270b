package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// okBackend accepts everything: whatever a client sends, a failure can
// only come from the server itself.
type okBackend struct{}

func (okBackend) Register(context.Context, api.Registration) error  { return nil }
func (okBackend) Unregister(context.Context, api.WorkerRef) error   { return nil }
func (okBackend) Workers(context.Context) ([]api.WorkerInfo, error) { return nil, nil }
func (okBackend) PrefillDone(context.Context, string) error         { return nil }
func (okBackend) Free(context.Context, string) error                { return nil }
func (okBackend) Ready(context.Context) error                       { return nil }
func (okBackend) RegisterPeer(context.Context, string) error        { return nil }
func (okBackend) DeregisterPeer(context.Context, string) error      { return nil }
func (okBackend) Peers(context.Context) ([]string, error)           { return nil, nil }
func (okBackend) Dump(context.Context, api.DumpSink) error          { return nil }
func (okBackend) ForgetSession(context.Context, string) error       { return nil }
func (okBackend) Session(_ context.Context, r api.SessionRequest) (api.SessionInfo, error) {
	return api.SessionInfo{SessionID: r.ID}, nil
}
func (okBackend) Query(context.Context, api.QueryRequest) (api.QueryResult, error) {
	return cannedResult(), nil
}
func (okBackend) QueryByHash(context.Context, api.QueryByHashRequest) (api.QueryResult, error) {
	return cannedResult(), nil
}
func (okBackend) Route(_ context.Context, r api.RouteRequest) (api.RouteResult, error) {
	return api.RouteResult{WorkerID: 1, RequestID: r.RequestID}, nil
}

var fuzzPaths = []string{"/register", "/unregister", "/query", "/query_by_hash", "/route", "/route/x/free"}

// FuzzRequestBody: no body makes the server answer 5xx or anything but a
// JSON object.
func FuzzRequestBody(f *testing.F) {
	for _, tc := range badCases() {
		if tc.method == "POST" && len(tc.body) < 4096 {
			for i, p := range fuzzPaths {
				if p == tc.path {
					f.Add(uint8(i), []byte(tc.body))
				}
			}
		}
	}
	for p, b := range validBodies {
		for i, fp := range fuzzPaths {
			if fp == p {
				f.Add(uint8(i), []byte(b))
			}
		}
	}
	h := New(okBackend{}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f.Fuzz(func(t *testing.T, p uint8, body []byte) {
		path := fuzzPaths[int(p)%len(fuzzPaths)]
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q → %d %s", path, body, rec.Code, rec.Body)
		}
		var obj map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &obj); err != nil {
			t.Fatalf("%s %q → %d, body not a JSON object: %q", path, body, rec.Code, rec.Body)
		}
	})
}

// FuzzReadDump: ReadDump never panics.
func FuzzReadDump(f *testing.F) {
	f.Add([]byte(goldenDump))
	f.Add([]byte(`{"m:t":{"block_size":16,"events":[{"worker_id":1,"event":{"event_id":1,"data":"cleared"}}]}}`))
	f.Add([]byte(`{"m:t":{"error":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ReadDump(bytes.NewReader(b), &recordSink{})
	})
}

// TestConcurrent runs every endpoint from many goroutines (for -race).
func TestConcurrent(t *testing.T) {
	h, fb, _ := newTestHandler(t, Options{})
	fb.workers = fixtureWorkers()
	fb.dumpNS, fb.dumpEvts = fixtureDump()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				id := fmt.Sprintf("g%d-%d", g, i)
				checks := []struct {
					method, path, body string
					want               int
				}{
					{"POST", "/route", `{"token_ids":[1,2,3],"model_name":"llama","request_id":"` + id + `"}`, 200},
					{"POST", "/route/" + id + "/prefill_done", "", 200},
					{"POST", "/route/" + id + "/free", "", 200},
					{"GET", "/workers", "", 200},
					{"GET", "/dump", "", 200},
					{"GET", "/metrics", "", 200},
					{"POST", "/query", `{"token_ids":[1],"model_name":"panic"}`, 500},
				}
				for _, c := range checks {
					if rec := do(h, c.method, c.path, c.body); rec.Code != c.want {
						t.Errorf("%s %s: %d", c.method, c.path, rec.Code)
					}
				}
			}
		})
	}
	wg.Wait()
	var m strings.Builder
	h.WriteMetrics(&m)
	for _, want := range []string{
		`kvrouter_http_requests_total{path="/route",code="200"} 400`,
		`kvrouter_http_requests_total{path="/query",code="500"} 400`,
		"kvrouter_http_panics_total 400",
		"kvrouter_http_requests_in_flight 0",
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, m.String())
		}
	}
}

func TestNewServer(t *testing.T) {
	s := NewServer("127.0.0.1:0", http.NotFoundHandler(), Options{WriteTimeout: 7 * time.Second})
	if s.Addr != "127.0.0.1:0" || s.ReadHeaderTimeout != 5*time.Second || s.ReadTimeout != 30*time.Second ||
		s.WriteTimeout != 7*time.Second || s.IdleTimeout != 2*time.Minute || s.MaxHeaderBytes != 64<<10 || s.ErrorLog == nil {
		t.Errorf("server %+v", s)
	}
}

// TestDefaultRequestID: without Options.NewRequestID, ids are random and
// pass the server's own request id check.
func TestDefaultRequestID(t *testing.T) {
	h := New(okBackend{}, Options{})
	seen := map[string]bool{}
	for range 100 {
		rec := do(h, "POST", "/route", `{"token_ids":[1],"model_name":"m"}`)
		var res api.RouteResult
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if checkRequestID(res.RequestID) != nil || len(res.RequestID) < 20 || seen[res.RequestID] {
			t.Fatalf("request id %q", res.RequestID)
		}
		seen[res.RequestID] = true
	}
}

// TestClientTypesRoundTrip: the exported types are the wire contract for
// clients too (kvrouter demo): marshaling a request and decoding the answer
// with them agrees with the server.
func TestClientTypesRoundTrip(t *testing.T) {
	h, fb, _ := newTestHandler(t, Options{})
	rank := messages.DpRank(2)
	body, _ := json.Marshal(api.WorkerRef{InstanceID: 1<<64 - 1, ModelName: "m", DpRank: &rank})
	if rec := do(h, "POST", "/unregister", string(body)); rec.Code != 200 {
		t.Fatalf("unregister: %d %s", rec.Code, rec.Body)
	}
	body, _ = json.Marshal(api.RouteRequest{BlockHashes: []messages.LocalHash{1<<64 - 1}, ModelName: "m", IncludeScores: true})
	rec := do(h, "POST", "/route", string(body))
	var res api.RouteResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || res.WorkerID != 1<<64-1 || len(res.Scores) != 2 {
		t.Fatalf("route: %v %+v", err, res)
	}
	rec = do(h, "POST", "/query", `{"token_ids":[1],"model_name":"m"}`)
	var qr api.QueryResult
	if err := json.Unmarshal(rec.Body.Bytes(), &qr); err != nil || qr.Scores[1<<64-1][1] != 16 {
		t.Fatalf("query: %v %+v", err, qr)
	}
	want := []string{
		`Unregister {"instance_id":18446744073709551615,"model_name":"m","dp_rank":2}`,
		`Route {"block_hashes":[18446744073709551615],"model_name":"m","tenant_id":"default","request_id":"req-1","include_scores":true}`,
		`Query {"token_ids":[1],"model_name":"m","tenant_id":"default"}`,
	}
	if got := fb.takeCalls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkRoute measures the HTTP layer's share of a /route: a 64-block
// prompt (1024 tokens) decoded, validated, answered.
func BenchmarkRoute(b *testing.B) {
	h := New(okBackend{}, Options{NewRequestID: func() string { return "r" }})
	body := routeBodyOf(1024)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/route", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code, rec.Body)
		}
	}
}

// FuzzFastDecode: whatever the fast path accepts, encoding/json (the path
// that defines the semantics) accepts with the same result.
func FuzzFastDecode(f *testing.F) {
	for _, b := range []string{
		validBodies["/route"], validBodies["/query"], validBodies["/query_by_hash"],
		`{"token_ids":[1, 2 ,3],"model_name":"m","tenant_id":null,"include_scores":true,"request_id":"r"}`,
		`{"block_hashes":[-1,18446744073709551615,0],"model_name":"ü","session_id":"s"}`,
		`{"token_ids":[01],"model_name":"m"}`, `{"token_ids":[1],"token_ids":[2]}`, `{"Model_Name":"m"}`,
		`{"model_name":"a\u0041"}`, "{\"model_name\":\"\xff\"}", `{"token_ids":[-],"model_name":"m"}`,
		` { } `, `{"include_scores":false}`, `{"token_ids":[1,],"model_name":"m"}`,
	} {
		for k := range 3 {
			f.Add(uint8(k), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		var fast, slow fastBody
		switch kind % 3 {
		case 0:
			fast, slow = &routeBody{}, &routeBody{}
		case 1:
			fast, slow = &queryBody{}, &queryBody{}
		default:
			fast, slow = &queryByHashBody{}, &queryByHashBody{}
		}
		if !fastDecode(body, fast) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(slow); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json: %v", body, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("fast path accepted %q with trailing data", body)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: fast %+v, encoding/json %+v", body, fast, slow)
		}
	})
}

// TestFastPathTaken: plain bodies of the hot endpoints take the fast path,
// unusual ones fall back.
func TestFastPathTaken(t *testing.T) {
	for body, want := range map[string]bool{
		validBodies["/route"]:                         true,
		`{"token_ids":[],"model_name":"m"}`:           true,
		`{"token_ids":[1],"model_name":"m\u00fc"}`:    false, // escape
		`{"token_ids":[1],"model_name":"m","x":1}`:    false, // unknown key
		`{"token_ids":[1],"MODEL_NAME":"m"}`:          false, // case-folded key
		`{"token_ids":[1],"token_ids":[1]}`:           false, // repeated key
		`{"token_ids":[1.0],"model_name":"m"}`:        false,
		`{"token_ids":[1],"model_name":"m"} x`:        false,
		`{"token_ids":[1],"model_name":"m",}`:         false,
		`{"token_ids":[4294967296],"model_name":"m"}`: false,
	} {
		if got := fastDecode([]byte(body), &routeBody{}); got != want {
			t.Errorf("%s: fast path %v, want %v", body, got, want)
		}
	}
}
