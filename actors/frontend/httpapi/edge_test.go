package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/messages/api"
)

// recordingBody is a request body that records whether it was read.
type recordingBody struct {
	r    io.Reader
	read atomic.Bool
}

func (b *recordingBody) Read(p []byte) (int, error) { b.read.Store(true); return b.r.Read(p) }
func (b *recordingBody) Close() error               { return nil }

// waitingBackend holds each Route until its context ends or release is
// closed, saying on entered when one arrives.
type waitingBackend struct {
	*fakeBackend
	entered chan struct{}
	release chan struct{}
}

func (b *waitingBackend) Route(ctx context.Context, req api.RouteRequest) (api.RouteResult, error) {
	b.entered <- struct{}{}
	select {
	case <-ctx.Done():
		return api.RouteResult{}, ctx.Err()
	case <-b.release:
	}
	return b.fakeBackend.Route(ctx, req)
}

const edgeRouteBody = `{"token_ids":[1,2],"model_name":"llama","request_id":"r"}`

// routeRequest is a POST /route whose body records its reads; length is
// its Content-Length (-1: chunked).
func routeRequest(ctx context.Context, body string, length int64) (*http.Request, *recordingBody) {
	rb := &recordingBody{r: strings.NewReader(body)}
	req := httptest.NewRequestWithContext(ctx, "POST", "/route", nil)
	req.Body, req.ContentLength = rb, length
	req.Header.Set("Content-Type", "application/json")
	return req, rb
}

func serveAsync(h http.Handler, req *http.Request) <-chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		done <- rec
	}()
	return done
}

// With the edge full, a /route is answered 503 overloaded with
// Retry-After without its body being read, counted by endpoint and
// reason; a client that goes away frees its slot, and the edge takes the
// next request.
func TestEdgeRefusesBeforeTheBodyAndFreesOnCancel(t *testing.T) {
	be := &waitingBackend{fakeBackend: &fakeBackend{}, entered: make(chan struct{}, 4), release: make(chan struct{})}
	edge := admission.NewEdge(admission.EdgeConfig{EdgeLimits: admission.EdgeLimits{MaxInFlight: 1}})
	h := New(be, Options{Edge: edge})

	ctx, cancel := context.WithCancel(context.Background())
	first, firstBody := routeRequest(ctx, edgeRouteBody, int64(len(edgeRouteBody)))
	firstDone := serveAsync(h, first)
	<-be.entered
	if !firstBody.read.Load() {
		t.Fatal("the admitted request's body was not read")
	}
	if n, b := edge.InFlight(); n != 1 || b != int64(len(edgeRouteBody)) {
		t.Fatalf("in flight %d (%d bytes), want 1 (%d)", n, b, len(edgeRouteBody))
	}

	over, overBody := routeRequest(context.Background(), edgeRouteBody, int64(len(edgeRouteBody)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, over)
	var eb errorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &eb)
	if rec.Code != http.StatusServiceUnavailable || eb.Reason != api.ReasonOverloaded || rec.Header().Get("Retry-After") == "" {
		t.Errorf("over the edge: %d %+v Retry-After %q, want 503 overloaded with Retry-After", rec.Code, eb, rec.Header().Get("Retry-After"))
	}
	if overBody.read.Load() {
		t.Error("the refused request's body was read")
	}
	refusedOnce(t, edge)

	cancel() // the client goes away: the Backend returns, the slot is freed
	if rec := <-firstDone; rec.Code != statusClientClosed {
		t.Errorf("canceled request answered %d, want %d", rec.Code, statusClientClosed)
	}
	if n, b := edge.InFlight(); n != 0 || b != 0 {
		t.Fatalf("after the cancel: %d in flight (%d bytes), want none", n, b)
	}
	close(be.release)
	next, _ := routeRequest(context.Background(), edgeRouteBody, int64(len(edgeRouteBody)))
	if rec := serveAsync(h, next); (<-rec).Code != http.StatusOK {
		t.Error("the edge did not take a request after the cancel freed its slot")
	}
}

// A panic in the handler (recovered by wrap) and an error answer free the
// slot too; the edge applies to the table's edged endpoints only.
func TestEdgeFreesOnPanicAndError(t *testing.T) {
	edge := admission.NewEdge(admission.EdgeConfig{EdgeLimits: admission.EdgeLimits{MaxInFlight: 1}})
	h := New(&fakeBackend{}, Options{Edge: edge, Logger: slog.New(slog.DiscardHandler)})
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"token_ids":[1],"model_name":"panic"}`, http.StatusInternalServerError},
		{`{"token_ids":"nope"}`, http.StatusBadRequest},
		{edgeRouteBody, http.StatusOK},
	} {
		if rec := do(h, "POST", "/route", tc.body); rec.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.body, rec.Code, tc.want)
		}
		if n, _ := edge.InFlight(); n != 0 {
			t.Fatalf("after %s: %d in flight, want 0", tc.body, n)
		}
	}
	do(h, "POST", "/query", `{"token_ids":[1,2],"model_name":"llama"}`)
	if got := edge.Refused("POST /query", admission.ReasonHostInFlight); got != 0 {
		t.Errorf("/query went through the edge")
	}
}

// A Content-Length over the body cap is answered 413 body_too_large
// before the body is read, even with nothing in flight, at a cost that does
// not grow with the declared size.
func TestEdgeRefusesOverLargeContentLength(t *testing.T) {
	edge := admission.NewEdge(admission.EdgeConfig{})
	h := New(&fakeBackend{}, Options{Edge: edge, MaxBodyBytes: 1 << 10})
	refuse := func(length int64) (*httptest.ResponseRecorder, *recordingBody) {
		req, rb := routeRequest(context.Background(), edgeRouteBody, length)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, rb
	}
	rec, rb := refuse(1 << 40)
	var eb errorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &eb)
	if rec.Code != http.StatusRequestEntityTooLarge || eb.Reason != api.ReasonBodyTooLarge || rb.read.Load() {
		t.Errorf("Content-Length 1 TiB: %d %+v, body read %v; want 413 body_too_large unread", rec.Code, eb, rb.read.Load())
	}
	// Bytes allocated per refusal of a 1 TiB declaration: a response's
	// worth, nothing sized by the declaration (a reader that grew its
	// buffer by even a part of it would be megabytes).
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		refuse(1 << 40)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 32<<10 {
		t.Errorf("refusing a 1 TiB declaration allocated %d bytes a request, want under 32 KiB", per)
	}
	if got := edge.Refused("POST /route", admission.ReasonBodyTooLarge); got != 101 {
		t.Errorf("refused body_too_large %d, want 101", got)
	}
}

// A chunked body (no Content-Length) is taken and charged the body cap,
// the most its reader lets it take: with a budget of one cap, a second
// chunked /route waits its turn while a declared small one still fits
// nowhere either.
func TestEdgeChargesChunkedBodiesTheCap(t *testing.T) {
	be := &waitingBackend{fakeBackend: &fakeBackend{}, entered: make(chan struct{}, 4), release: make(chan struct{})}
	const bodyCap = 4 << 10
	edge := admission.NewEdge(admission.EdgeConfig{EdgeLimits: admission.EdgeLimits{MaxBytesInFlight: bodyCap}})
	h := New(be, Options{Edge: edge, MaxBodyBytes: bodyCap})
	first, _ := routeRequest(context.Background(), edgeRouteBody, -1)
	done := serveAsync(h, first)
	<-be.entered
	if _, b := edge.InFlight(); b != bodyCap {
		t.Fatalf("a chunked body is charged %d bytes, want the cap %d", b, bodyCap)
	}
	for _, length := range []int64{-1, int64(len(edgeRouteBody))} {
		req, rb := routeRequest(context.Background(), edgeRouteBody, length)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || rb.read.Load() {
			t.Errorf("Content-Length %d beside a chunked body at the budget: %d (read %v), want 503 unread", length, rec.Code, rb.read.Load())
		}
	}
	if got := edge.Refused("POST /route", admission.ReasonBytesInFlight); got != 2 {
		t.Errorf("refused bytes_in_flight %d, want 2", got)
	}
	close(be.release)
	if rec := <-done; rec.Code != http.StatusOK {
		t.Errorf("the chunked request answered %d", rec.Code)
	}
}

// refusedOnce checks edge counted one host_in_flight refusal of POST
// /route, on its counter and in its metrics.
func refusedOnce(t *testing.T, edge *admission.Edge) {
	t.Helper()
	if got := edge.Refused("POST /route", admission.ReasonHostInFlight); got != 1 {
		t.Errorf("refused host_in_flight on POST /route: %d, want 1", got)
	}
	var m strings.Builder
	_ = edge.WriteMetrics(&m)
	if !strings.Contains(m.String(), `kvrouter_edge_refused_total{endpoint="POST /route",reason="host_in_flight"} 1`) {
		t.Errorf("metrics lack the refusal:\n%s", m.String())
	}
}
