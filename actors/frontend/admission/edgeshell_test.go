package admission

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
)

// Through a real server: with the edge full, a request whose head has
// arrived and whose body has not been sent is refused at once (503 with
// Retry-After from the refuse callback), its handler never run; its body
// may follow on the same connection, which then carries the next request,
// admitted once the load has gone.
func TestEdgeHandlerAnswersBeforeTheBody(t *testing.T) {
	edge := NewEdge(EdgeConfig{EdgeLimits: EdgeLimits{MaxInFlight: 1}})
	entered, release := make(chan string, 4), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		entered <- string(b)
		<-release
		_, _ = io.WriteString(w, "served "+string(b))
	})
	srv := httptest.NewServer(edge.Handler("proxy", 0, next, func(w http.ResponseWriter, _ *http.Request, reason Reason) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, reason.String())
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	admitted := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader("first"))
		if err != nil {
			admitted <- 0
			return
		}
		_ = resp.Body.Close()
		admitted <- resp.StatusCode
	}()
	<-entered

	raw := frontendtest.DialRaw(t, addr)
	raw.Head(t, "POST", "/", len("late"))
	resp, body := raw.Answer(t)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != RetryAfter || body != "host_in_flight" {
		t.Errorf("refused before its body: %d Retry-After %q %q, want 503 host_in_flight with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := edge.Refused("proxy", ReasonHostInFlight); got != 1 {
		t.Errorf("refused %d, want 1", got)
	}

	close(release)
	if code := <-admitted; code != http.StatusOK {
		t.Fatalf("the admitted request: %d, want 200", code)
	}
	frontendtest.WaitFor(t, "the edge empty", func() (bool, any) {
		n, _ := edge.InFlight()
		return n == 0, strconv.Itoa(n) + " in flight"
	})
	raw.Send(t, "late")
	raw.Head(t, "POST", "/", len("again"))
	raw.Send(t, "again")
	if resp, body := raw.Answer(t); resp.StatusCode != http.StatusOK || body != "served again" {
		t.Errorf("the next request on the refused one's connection: %d %q, want 200 served again", resp.StatusCode, body)
	}
	if got := <-entered; got != "again" {
		t.Errorf("the handler read %q, want the admitted request's body", got)
	}
}
