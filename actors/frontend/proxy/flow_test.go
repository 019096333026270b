package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
)

// recorder is a fake engine front that records the request ids it is
// sent, in order, and passes them to the simulated engine.
type recorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	ids []string
}

func newRecorder(t *testing.T, engine string) *recorder {
	hop := engineHop(engine)
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.ids = append(rec.ids, r.Header.Get(RequestIDHeader))
		rec.mu.Unlock()
		hop(w, r, nil)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// flowFleet is one engine that holds its first answer open until
// released, behind a recorder, with flow control on and "no room" meaning
// more than one block booked: while the first answer streams every other
// request waits.
func flowFleet(t *testing.T, clk *frontendtest.Clock) (*fleet, *recorder, *requestpath.Guard, chan struct{}) {
	release := make(chan struct{})
	var n atomic.Int64
	g := newTestGuard(t, clk, requestpath.GuardConfig{BreakerOff: true, Flow: &requestpath.FlowConfig{TTL: 10 * time.Second,
		Objectives: map[string]int{"critical": 10, "batch": 0, "scavenger": -1}}})
	f := newGuardedFleet(t, 1, func(ctx context.Context) {
		if n.Add(1) == 1 {
			select {
			case <-ctx.Done():
			case <-release:
			}
		}
	}, Options{}, requestpath.Config{Guard: g, ShedAboveBlocks: 1})
	rec := newRecorder(t, f.https[0].ServingEndpoint())
	f.reserve(1, rec.srv.Listener.Addr().String())
	return f, rec, g, release
}

// holdFirst starts the request that holds the engine and waits until it
// streams (booked, two blocks).
func (f *fleet) holdFirst() *http.Response {
	f.t.Helper()
	resp, err := f.post(context.Background(), "/v1/completions", `{"model":"m","stream":true,"prompt":`+tokens(1, 8)+`}`, RequestIDHeader, "first")
	if err != nil {
		f.t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		f.t.Fatalf("first chunk %q, %v", line, err)
	}
	return resp
}

type answer struct {
	code  int
	body  string
	after string
}

// queue posts a request in the background and waits until the queue
// holds want.
func (f *fleet) queue(ctx context.Context, g *requestpath.Guard, id, objective, flow string, want int) <-chan answer {
	f.t.Helper()
	out := make(chan answer, 1)
	go func() {
		resp, err := f.post(ctx, "/v1/completions", fmt.Sprintf(`{"model":"m","prompt":%s}`, tokens(50+want, 8)),
			RequestIDHeader, id, "x-gateway-inference-objective", objective, "x-gateway-inference-fairness-id", flow)
		if err != nil {
			out <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- answer{resp.StatusCode, string(b), resp.Header.Get("Retry-After")}
	}()
	waitFor(f.t, id+" queued", func() (bool, any) { q, ok := g.Resting(); return ok && q == want, q })
	return out
}

// Through the proxy: while the only engine has no room the requests wait
// (the proxy holds their connections); when its answer ends they go in
// order — the critical band first, then the default band's fairness ids
// in turn — each scored when it leaves the queue. A sheddable objective
// (a band below 0) is refused at once.
func TestProxyFlowControlOrder(t *testing.T) {
	f, rec, g, release := flowFleet(t, frontendtest.NewClock())
	first := f.holdFirst()
	ctx := context.Background()
	var as []<-chan answer
	for i, r := range [][3]string{{"x1", "batch", "x"}, {"x2", "batch", "x"}, {"y1", "", "y"}, {"crit", "critical", "z"}} {
		as = append(as, f.queue(ctx, g, r[0], r[1], r[2], i+1))
	}
	shed, err := f.post(ctx, "/v1/completions", fmt.Sprintf(`{"model":"m","prompt":%s}`, tokens(90, 8)),
		RequestIDHeader, "shed", "x-gateway-inference-objective", "scavenger")
	if err != nil {
		t.Fatal(err)
	}
	shed.Body.Close()
	if shed.StatusCode != http.StatusTooManyRequests || g.Queued() != len(as) {
		t.Fatalf("sheddable request: %d with %d queued, want 429 at once", shed.StatusCode, g.Queued())
	}
	close(release)
	_, _ = io.Copy(io.Discard, first.Body)
	first.Body.Close()
	for i, c := range as {
		var a answer
		waitFor(t, "answer", func() (bool, any) {
			select {
			case a = <-c:
				return true, nil
			default:
				return false, rec.seen()
			}
		})
		if a.code != 200 {
			t.Fatalf("request %d: %d %s", i, a.code, a.body)
		}
	}
	if got, want := fmt.Sprint(rec.seen()), "[first crit x1 y1 x2]"; got != want {
		t.Fatalf("engine saw %s, want %s", got, want)
	}
	f.idle()
}

// Through the proxy: a queued request past its TTL gets 429 overloaded
// with Retry-After in OpenAI's shape; a client that hangs up while queued
// leaves the queue.
func TestProxyFlowControlTTLAndCancel(t *testing.T) {
	clk := frontendtest.NewClock()
	f, _, g, release := flowFleet(t, clk)
	first := f.holdFirst()
	ctx, cancel := context.WithCancel(context.Background())
	gone := f.queue(ctx, g, "gone", "", "a", 1)
	cancel()
	waitFor(t, "the cancelled request out of the queue", func() (bool, any) { return g.Queued() == 0, g.Queued() })
	<-gone
	late := f.queue(context.Background(), g, "late", "", "a", 1)
	clk.Advance(10 * time.Second)
	g.Dispatch()
	a := <-late
	var e struct{ Error struct{ Type, Code string } }
	_ = json.Unmarshal([]byte(a.body), &e)
	if a.code != http.StatusTooManyRequests || a.after != "1" || e.Error.Code != "overloaded" || e.Error.Type != "rate_limit_error" {
		t.Fatalf("after the TTL: %d Retry-After %q %s", a.code, a.after, a.body)
	}
	close(release)
	_, _ = io.Copy(io.Discard, first.Body)
	first.Body.Close()
	f.idle()
}
