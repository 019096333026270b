package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// fakeBackend answers canned results and records each call as
// "Method <JSON of the argument>", so tests see exactly what the server
// decoded. Magic values trigger the error paths:
//
//	model_name "boom"     → an internal error whose text must not leak
//	model_name "panic"    → a panic
//	model_name "unknown"  → ErrNotFound (unknown namespace)
//	model_name "busy"     → Errorf(ErrUnavailable, "no_workers", …)
//	model_name "nan"      → a RouteResult with a NaN logit (unencodable)
//	model_name "mismatch" → Errorf(ErrConflict, "block_size_mismatch", …)
//	model_name "empty"    → an empty QueryResult
//	model_name "degraded" → a degraded route answer with overlap per tier
//	instance_id 7         → already registered (ErrConflict)
//	instance_id 99        → unknown worker (ErrNotFound)
//	request id "nope"     → unknown request; "slow" → context.DeadlineExceeded
//	request_id "dup"      → Errorf(ErrConflict, "duplicate_request_id", …)
//	session_id "sess-credit" → a route answer with session credit
//	session id "gone"     → unknown session (ErrNotFound); "bad" →
//	                        Errorf(ErrInvalid, "invalid_session_id", …);
//	                        "boom" → an internal error
type fakeBackend struct {
	mu       sync.Mutex
	calls    []string
	workers  []api.WorkerInfo
	workErr  error
	ready    error
	dump     func(ctx context.Context, sink api.DumpSink) error
	dumpNS   []api.DumpNamespace
	dumpEvts [][]messages.RouterEvent
	// routeTokens is the token count of the last Route call.
	routeTokens int
	peers       map[string]bool
}

const leakyText = "dial tcp 10.9.8.7:5557: password=hunter2"

func (f *fakeBackend) record(method string, arg any) {
	b, err := json.Marshal(arg)
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	f.calls = append(f.calls, method+" "+string(b))
	f.mu.Unlock()
}

func (f *fakeBackend) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func modelErr(model string) error {
	switch model {
	case "boom":
		return errors.New(leakyText)
	case "panic":
		panic("kaboom: " + leakyText)
	case "unknown":
		return fmt.Errorf("no index for model=%q: %w", model, api.ErrNotFound)
	case "busy":
		return api.Errorf(api.ErrUnavailable, "no_workers", "model %q has no live workers", model)
	case "mismatch":
		return api.Errorf(api.ErrConflict, "block_size_mismatch", "model %q uses block size 32, not 16", model)
	}
	return nil
}

func (f *fakeBackend) Register(_ context.Context, reg api.Registration) error {
	f.record("Register", reg)
	if reg.InstanceID == 7 {
		return api.Errorf(api.ErrConflict, "already_registered", "instance 7 dp_rank %d already registered", reg.DpRank)
	}
	return modelErr(reg.ModelName)
}

func (f *fakeBackend) Unregister(_ context.Context, ref api.WorkerRef) error {
	f.record("Unregister", ref)
	if ref.InstanceID == 99 {
		return fmt.Errorf("instance 99: %w", api.ErrNotFound)
	}
	return modelErr(ref.ModelName)
}

func (f *fakeBackend) Workers(context.Context) ([]api.WorkerInfo, error) {
	f.record("Workers", nil)
	return f.workers, f.workErr
}

func (f *fakeBackend) Query(_ context.Context, q api.QueryRequest) (api.QueryResult, error) {
	f.record("Query", q)
	if err := modelErr(q.ModelName); err != nil {
		return api.QueryResult{}, err
	}
	if q.ModelName == "empty" {
		return api.QueryResult{}, nil
	}
	res := cannedResult()
	if q.IncludeInstances {
		res.Instances = cannedInstances()
	}
	return res, nil
}

func (f *fakeBackend) QueryByHash(_ context.Context, q api.QueryByHashRequest) (api.QueryResult, error) {
	f.record("QueryByHash", q)
	if err := modelErr(q.ModelName); err != nil {
		return api.QueryResult{}, err
	}
	res := cannedResult()
	if q.IncludeInstances {
		res.Instances = cannedInstances()
	}
	return res, nil
}

func cannedResult() api.QueryResult {
	return api.QueryResult{
		Scores: map[messages.WorkerID]map[messages.DpRank]uint64{
			1:                    {0: 32},
			18446744073709551615: {1: 16, 0: 48},
		},
		Frequencies: []uint64{2, 2, 1},
		TreeSizes: map[messages.WorkerID]map[messages.DpRank]uint64{
			1:                    {0: 5},
			18446744073709551615: {0: 3, 1: 4},
		},
	}
}

func (f *fakeBackend) Dump(ctx context.Context, sink api.DumpSink) error {
	f.record("Dump", nil)
	if f.dump != nil {
		return f.dump(ctx, sink)
	}
	for i, ns := range f.dumpNS {
		if err := sink.Namespace(ns); err != nil {
			return err
		}
		for _, ev := range f.dumpEvts[i] {
			if err := sink.Event(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *fakeBackend) Route(_ context.Context, req api.RouteRequest) (api.RouteResult, error) {
	f.mu.Lock()
	f.routeTokens = len(req.TokenIDs)
	f.mu.Unlock()
	f.record("Route", req)
	if err := modelErr(req.ModelName); err != nil {
		return api.RouteResult{}, err
	}
	if req.RequestID == "dup" {
		return api.RouteResult{}, api.Errorf(api.ErrConflict, "duplicate_request_id", "request dup is already routed")
	}
	res := api.RouteResult{WorkerID: 18446744073709551615, DpRank: 1, OverlapBlocks: 3, CachedTokens: 48, RequestID: req.RequestID}
	if req.SessionID == "sess-credit" {
		res.SessionCreditBlocks = 2
	}
	if req.ModelName == "degraded" {
		res.Degraded = true
		res.OverlapByTier = map[string]uint32{"device": 2, "host": 1}
	}
	if req.IncludeScores || req.ModelName == "nan" {
		res.Scores = []api.RouteScore{
			{WorkerID: 1, DpRank: 0, OverlapBlocks: 0, ActivePrefillTokens: 100, ActiveDecodeBlocks: 7, Logit: 73.25},
			{WorkerID: 18446744073709551615, DpRank: 1, OverlapBlocks: 3, ActivePrefillTokens: 0, ActiveDecodeBlocks: 2, Logit: 3.5, Degraded: true},
		}
	}
	if req.ModelName == "nan" {
		res.Scores[0].Logit = math.NaN()
	}
	return res, nil
}

func requestErr(id string) error {
	switch id {
	case "nope":
		return fmt.Errorf("request %s: %w", id, api.ErrNotFound)
	case "slow":
		return fmt.Errorf("asking the router: %w", context.DeadlineExceeded)
	}
	return nil
}

func (f *fakeBackend) PrefillDone(_ context.Context, id string) error {
	f.record("PrefillDone", id)
	return requestErr(id)
}

func (f *fakeBackend) Free(_ context.Context, id string) error {
	f.record("Free", id)
	return requestErr(id)
}

func sessionErr(id string) error {
	switch id {
	case "gone":
		return fmt.Errorf("session %s: %w", id, api.ErrNotFound)
	case "bad":
		return api.Errorf(api.ErrInvalid, "invalid_session_id", "session id %q: printable ASCII only", id)
	case "boom":
		return errors.New(leakyText)
	}
	return nil
}

func (f *fakeBackend) Session(_ context.Context, req api.SessionRequest) (api.SessionInfo, error) {
	f.record("Session", req)
	if err := sessionErr(req.ID); err != nil {
		return api.SessionInfo{}, err
	}
	at := time.Date(2026, 11, 3, 10, 4, 5, 250_000_000, time.UTC)
	l := api.SessionLineage{WorkerID: 18446744073709551615, DpRank: 1, Depth: 3, Blocks: 4,
		NewestHash: 18446744073709551615, Updated: at}
	if req.Chain {
		l.Chain = []messages.ExternalHash{7, 8, 18446744073709551615}
	}
	return api.SessionInfo{SessionID: req.ID, Namespaces: []api.SessionNamespace{
		{ModelName: "llama", TenantID: "default", LastSeen: at, Lineages: []api.SessionLineage{l}},
		{ModelName: "llama", TenantID: "acme", LastSeen: at.Add(-time.Minute)}, // no lineages: written []
	}}, nil
}

func (f *fakeBackend) ForgetSession(_ context.Context, id string) error {
	f.record("ForgetSession", id)
	return sessionErr(id)
}

func (f *fakeBackend) Ready(context.Context) error {
	f.record("Ready", nil)
	return f.ready
}

// newTestHandler returns a handler over a fresh fake with a deterministic
// request id generator and a logger into logs.
func newTestHandler(t testing.TB, opts Options) (*Handler, *fakeBackend, *strings.Builder) {
	t.Helper()
	fb := &fakeBackend{}
	logs := &strings.Builder{}
	var mu sync.Mutex
	opts.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, logs}, nil))
	if opts.NewRequestID == nil {
		var n int
		var idMu sync.Mutex
		opts.NewRequestID = func() string {
			idMu.Lock()
			defer idMu.Unlock()
			n++
			return fmt.Sprintf("req-%d", n)
		}
	}
	return New(fb, opts), fb, logs
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// do sends one request. hdr holds header name/value pairs; a JSON body gets
// Content-Type: application/json unless hdr sets it.
func do(h http.Handler, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// RegisterPeer records the peer; "http://bad" → ErrInvalid.
func (f *fakeBackend) RegisterPeer(_ context.Context, url string) error {
	f.record("RegisterPeer", url)
	if url == "http://bad" {
		return api.Errorf(api.ErrInvalid, api.ReasonInvalidValue, "peer %q refused", url)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.peers == nil {
		f.peers = map[string]bool{}
	}
	f.peers[url] = true
	return nil
}

// DeregisterPeer drops a recorded peer; an unknown one → ErrNotFound.
func (f *fakeBackend) DeregisterPeer(_ context.Context, url string) error {
	f.record("DeregisterPeer", url)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.peers[url] {
		return api.Errorf(api.ErrNotFound, api.ReasonUnknownPeer, "peer %s is not registered", url)
	}
	delete(f.peers, url)
	return nil
}

// Peers lists the recorded peers, sorted.
func (f *fakeBackend) Peers(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for u := range f.peers {
		out = append(out, u)
	}
	slices.Sort(out)
	return out, nil
}
