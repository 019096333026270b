package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
)

// serveReal runs h in NewServer's http.Server (its timeouts, opts's) on a
// loopback port and returns the address.
func serveReal(t *testing.T, h http.Handler, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer("", h, opts)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// Over a real connection, with the edge full: a /route whose head has
// arrived and whose body has not been sent at all is answered 503
// overloaded with Retry-After — the refusal waits for no byte of the
// body — and counted; the connection then carries its body and the next
// request. The admitted request completes, and once it has the edge takes
// /route again.
func TestEdgeRefusesOnTheWireBeforeTheBodyArrives(t *testing.T) {
	be := &waitingBackend{fakeBackend: &fakeBackend{}, entered: make(chan struct{}, 4), release: make(chan struct{})}
	edge := admission.NewEdge(admission.EdgeConfig{EdgeLimits: admission.EdgeLimits{MaxInFlight: 1}})
	// A read timeout past the test's own waits: a refusal held until the
	// body arrives would show as no answer, not as a late one.
	opts := Options{Edge: edge, ReadTimeout: 10 * time.Minute}
	addr := serveReal(t, New(be, opts), opts)
	post := func() (int, error) {
		resp, err := http.Post("http://"+addr+"/route", "application/json", strings.NewReader(edgeRouteBody))
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}

	type result struct {
		code int
		err  error
	}
	admitted := make(chan result, 1)
	go func() { code, err := post(); admitted <- result{code, err} }()
	<-be.entered

	raw := frontendtest.DialRaw(t, addr)
	raw.Head(t, "POST", "/route", len(edgeRouteBody))
	resp, body := raw.Answer(t)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != admission.RetryAfter ||
		!strings.Contains(body, `"reason":"overloaded"`) {
		t.Errorf("refused before its body: %d Retry-After %q %s, want 503 overloaded with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp.Close {
		t.Error("the refusal closed the connection")
	}
	refusedOnce(t, edge)
	// The body follows late; the connection takes the next request.
	raw.Send(t, edgeRouteBody)
	raw.Send(t, "GET /health HTTP/1.1\r\nHost: kvrouter\r\n\r\n")
	if resp, body := raw.Answer(t); resp.StatusCode != http.StatusOK {
		t.Errorf("the next request on the refused one's connection: %d %s", resp.StatusCode, body)
	}

	close(be.release)
	if r := <-admitted; r.err != nil || r.code != http.StatusOK {
		t.Fatalf("the admitted request: %d %v, want 200", r.code, r.err)
	}
	frontendtest.WaitFor(t, "the edge empty", func() (bool, any) {
		n, b := edge.InFlight()
		return n == 0 && b == 0, strconv.Itoa(n) + " in flight, " + strconv.FormatInt(b, 10) + " bytes"
	})
	if code, err := post(); err != nil || code != http.StatusOK {
		t.Errorf("after the load dropped: %d %v, want 200", code, err)
	}
	if got := edge.Refused("POST /route", admission.ReasonHostInFlight); got != 1 {
		t.Errorf("refusals after the load dropped: %d, want still 1", got)
	}
}
