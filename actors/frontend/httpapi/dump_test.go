package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// recordSink collects what ReadDump feeds it.
type recordSink struct {
	ns     []api.DumpNamespace
	events [][]messages.RouterEvent
	failAt int // fail the n-th Event (1-based); 0 never
	n      int
}

func (s *recordSink) Namespace(ns api.DumpNamespace) error {
	s.ns = append(s.ns, ns)
	s.events = append(s.events, nil)
	return nil
}

func (s *recordSink) Event(ev messages.RouterEvent) error {
	s.n++
	if s.n == s.failAt {
		return errors.New("sink full")
	}
	s.events[len(s.events)-1] = append(s.events[len(s.events)-1], ev)
	return nil
}

// TestDumpRoundTrip: what GET /dump writes, ReadDump reads back unchanged.
func TestDumpRoundTrip(t *testing.T) {
	h, fb, _ := newTestHandler(t, Options{})
	fb.dumpNS, fb.dumpEvts = fixtureDump()
	rec := do(h, "GET", "/dump", "")
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("dump is not valid JSON:\n%s", rec.Body)
	}
	var got recordSink
	if err := ReadDump(rec.Body, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.ns, fb.dumpNS) {
		t.Errorf("namespaces\n got %+v\nwant %+v", got.ns, fb.dumpNS)
	}
	if !reflect.DeepEqual(got.events, fb.dumpEvts) {
		t.Errorf("events\n got %+v\nwant %+v", got.events, fb.dumpEvts)
	}
}

// TestReadDumpReference reads a dump in the reference indexer's own shape:
// no model_name/tenant_id (from the key), keys sorted as serde_json writes
// them, storage_tier absent (device), extra fields, Dynamo's unattributed
// session marker.
func TestReadDumpReference(t *testing.T) {
	const doc = `{"m:v1:default": {"block_size": 16, "events": [
	  {"worker_id": 5, "event": {"event_id": 1, "data": {"stored": {"parent_hash": null, "start_position": null,
	    "blocks": [{"block_hash": 1, "tokens_hash": 2, "mm_extra_info": null}]}}, "dp_rank": 0}},
	  {"worker_id": 5, "storage_tier": "host_pinned", "event": {"event_id": 2, "data": "cleared", "dp_rank": 2},
	   "session_id": "__dynamo_unattributed__"},
	  {"worker_id": 6, "storage_tier": "disk", "event": {"event_id": 3, "data": {"removed": {"block_hashes": [1]}}}}]},
	 "nokey": {"block_size": 8, "events": []}}`
	var got recordSink
	if err := ReadDump(strings.NewReader(doc), &got); err != nil {
		t.Fatal(err)
	}
	wantNS := []api.DumpNamespace{{ModelName: "m:v1", TenantID: "default", BlockSize: 16}, {ModelName: "nokey", TenantID: "default", BlockSize: 8}}
	wantEv := [][]messages.RouterEvent{{
		{WorkerID: 5, Event: messages.KvCacheEvent{EventID: 1, Kind: messages.KindStored,
			Blocks: []messages.StoredBlock{{BlockHash: 1, TokensHash: 2}}}},
		{WorkerID: 5, StorageTier: messages.TierHost, Event: messages.KvCacheEvent{EventID: 2, DpRank: 2, Kind: messages.KindCleared}},
		{WorkerID: 6, StorageTier: messages.TierDisk, Event: messages.KvCacheEvent{EventID: 3, Kind: messages.KindRemoved,
			Removed: []messages.ExternalHash{1}}},
	}, nil}
	if !reflect.DeepEqual(got.ns, wantNS) || !reflect.DeepEqual(got.events, wantEv) {
		t.Errorf("got %+v %+v\nwant %+v %+v", got.ns, got.events, wantNS, wantEv)
	}
}

func TestReadDumpErrors(t *testing.T) {
	ev := `{"worker_id":1,"event":{"event_id":1,"data":"cleared","dp_rank":0}}`
	for name, doc := range map[string]string{
		"empty":                   ``,
		"array":                   `[]`,
		"truncated":               `{"m:t":{"block_size":16,"events":[` + ev,
		"peer error":              `{"m:t":{"error":"index actor timed out"}}`,
		"no block_size":           `{"m:t":{"events":[]}}`,
		"block_size 0":            `{"m:t":{"block_size":0,"events":[]}}`,
		"no events":               `{"m:t":{"block_size":16}}`,
		"events twice":            `{"m:t":{"block_size":16,"events":[],"events":[]}}`,
		"model after events":      `{"m:t":{"block_size":16,"events":[],"model_name":"x"}}`,
		"streams after events":    `{"m:t":{"block_size":16,"events":[],"streams":[]}}`,
		"stream without endpoint": `{"m:t":{"block_size":16,"streams":[{"worker_id":1}],"events":[]}}`,
		"stream listed twice":     `{"m:t":{"block_size":16,"streams":[{"worker_id":1,"endpoint":"tcp://h:1"},{"worker_id":1,"endpoint":"tcp://h:2"}],"events":[]}}`,
		"stream seq not a number": `{"m:t":{"block_size":16,"streams":[{"worker_id":1,"endpoint":"tcp://h:1","seq":"x"}],"events":[]}}`,
		"trailing data":           `{} {}`,
		"events not an array":     `{"m:t":{"block_size":16,"events":{}}}`,
		"missing worker_id":       `{"m:t":{"block_size":16,"events":[{"event":{"event_id":1,"data":"cleared"}}]}}`,
		"missing event":           `{"m:t":{"block_size":16,"events":[{"worker_id":1}]}}`,
		"unknown tier":            `{"m:t":{"block_size":16,"events":[{"worker_id":1,"storage_tier":"gpu","event":{"event_id":1,"data":"cleared"}}]}}`,
		"unknown data string":     `{"m:t":{"block_size":16,"events":[{"worker_id":1,"event":{"event_id":1,"data":"flushed"}}]}}`,
		"unknown data variant":    `{"m:t":{"block_size":16,"events":[{"worker_id":1,"event":{"event_id":1,"data":{"moved":{}}}}]}}`,
		"two data variants":       `{"m:t":{"block_size":16,"events":[{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[]},"removed":{"block_hashes":[]}}}}]}}`,
		"block without hash":      `{"m:t":{"block_size":16,"events":[{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1}]}}}}]}}`,
		"negative worker":         `{"m:t":{"block_size":16,"events":[{"worker_id":-1,"event":{"event_id":1,"data":"cleared"}}]}}`,
		"float hash":              `{"m:t":{"block_size":16,"events":[{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[1.5]}}}}]}}`,
		"key not a string":        `{1:{}}`,
		"namespace not object":    `{"m:t":[]}`,
		"block_size wrong type":   `{"m:t":{"block_size":"16","events":[]}}`,
	} {
		if err := ReadDump(strings.NewReader(doc), &recordSink{}); err == nil {
			t.Errorf("%s: no error for %s", name, doc)
		}
	}
	// A sink error stops the read and comes back.
	doc := `{"m:t":{"block_size":16,"events":[` + ev + `,` + ev + `]}}`
	if err := ReadDump(strings.NewReader(doc), &recordSink{failAt: 2}); err == nil || !strings.Contains(err.Error(), "sink full") {
		t.Errorf("sink error: got %v", err)
	}
}

// bigDump emits one namespace of n events large enough to pass the
// writer's buffer, then fails with err.
func bigDump(n int, err error) func(context.Context, api.DumpSink) error {
	return func(_ context.Context, sink api.DumpSink) error {
		if e := sink.Namespace(api.DumpNamespace{ModelName: "m", TenantID: "t", BlockSize: 16}); e != nil {
			return e
		}
		blocks := make([]messages.StoredBlock, 64)
		for i := range blocks {
			blocks[i] = messages.StoredBlock{BlockHash: messages.ExternalHash(1<<63 + uint64(i)), TokensHash: messages.LocalHash(1<<62 + uint64(i))}
		}
		for i := range n {
			e := sink.Event(messages.RouterEvent{WorkerID: 1, Event: messages.KvCacheEvent{EventID: uint64(i + 1), Kind: messages.KindStored, Blocks: blocks}})
			if e != nil {
				return e
			}
		}
		return err
	}
}

// TestDumpCutAfterFirstBytes: a Backend failing once part of the document
// is out makes the server cut the connection (http.ErrAbortHandler), so no
// client mistakes a truncated dump for a complete one.
func TestDumpCutAfterFirstBytes(t *testing.T) {
	h, fb, logs := newTestHandler(t, Options{})
	fb.dump = bigDump(100, errors.New("index actor crashed"))
	rec := httptest.NewRecorder()
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want http.ErrAbortHandler", p)
			}
		}()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/dump", nil))
		t.Fatal("the handler returned normally")
	}()
	if rec.Body.Len() < 64<<10 || json.Valid(rec.Body.Bytes()) {
		t.Errorf("want a partial, invalid document; got %d bytes, valid=%v", rec.Body.Len(), json.Valid(rec.Body.Bytes()))
	}
	if !strings.Contains(logs.String(), "index actor crashed") {
		t.Errorf("log: %s", logs)
	}
	var m strings.Builder
	h.WriteMetrics(&m)
	if !strings.Contains(m.String(), `kvrouter_http_requests_total{path="/dump",code="200"} 1`) {
		t.Errorf("metrics:\n%s", m.String())
	}
}

// failingWriter fails every write, as a gone client does.
type failingWriter struct{ *httptest.ResponseRecorder }

func (f failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestDumpClientGone: the sink reports the client's failure to the Backend,
// which stops.
func TestDumpClientGone(t *testing.T) {
	h, fb, _ := newTestHandler(t, Options{})
	var sinkErr error
	inner := bigDump(10000, nil)
	fb.dump = func(ctx context.Context, sink api.DumpSink) error {
		sinkErr = inner(ctx, sink)
		return sinkErr
	}
	func() {
		defer func() { _ = recover() }()
		h.ServeHTTP(failingWriter{httptest.NewRecorder()}, httptest.NewRequest("GET", "/dump", nil))
	}()
	if sinkErr == nil || !strings.Contains(sinkErr.Error(), "broken pipe") {
		t.Errorf("the api.Backend saw %v, want the write error", sinkErr)
	}
}

// TestDumpWriterContract: a Backend that breaks the sink's rules gets an
// error, not a malformed document.
func TestDumpWriterContract(t *testing.T) {
	ns := api.DumpNamespace{ModelName: "m", TenantID: "t", BlockSize: 16}
	for name, f := range map[string]func(d *dumpWriter) error{
		"event first":     func(d *dumpWriter) error { return d.Event(fixtureEvent()) },
		"namespace twice": func(d *dumpWriter) error { d.Namespace(ns); return d.Namespace(ns) },
		"block size 0":    func(d *dumpWriter) error { return d.Namespace(api.DumpNamespace{ModelName: "m", TenantID: "t"}) },
		"no model":        func(d *dumpWriter) error { return d.Namespace(api.DumpNamespace{TenantID: "t", BlockSize: 1}) },
		"bad tier": func(d *dumpWriter) error {
			d.Namespace(ns)
			return d.Event(messages.RouterEvent{StorageTier: 9, Event: messages.KvCacheEvent{Kind: messages.KindCleared}})
		},
		"bad kind": func(d *dumpWriter) error { d.Namespace(ns); return d.Event(messages.RouterEvent{}) },
	} {
		var sb strings.Builder
		d := newDumpWriter(&sb)
		if err := f(d); err == nil || d.failed == nil {
			t.Errorf("%s: err %v, failed %v", name, err, d.failed)
		}
		if err := d.close(); err == nil {
			t.Errorf("%s: close after a failure succeeded", name)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\x1f\t\n\r", "ünï✓😀", "bad\xffutf8\xc3", "</script>&"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%q → %s: %v", s, got, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if s == "bad\xffutf8\xc3" {
			want = "bad\ufffdutf8\ufffd"
		}
		if back != want {
			t.Errorf("%q → %s → %q", s, got, back)
		}
	}
}
