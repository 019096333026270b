package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/enginesignals"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// signalled is a service with engine signals on and simulated engines
// serving OpenAI and vLLM-format metrics, registered with their serving
// endpoints.
type signalled struct {
	t       *testing.T
	svc     *Service
	engines []*simengine.Engine
	servers []*simengine.HTTPServer
	release chan struct{}
	held    sync.WaitGroup
}

func newSignalled(t *testing.T, n int) *signalled {
	t.Helper()
	svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second,
		Signals: &SignalsConfig{Scrape: enginesignals.Config{Interval: 5 * time.Millisecond, Timeout: 100 * time.Millisecond,
			StaleAfter: 200 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	s := &signalled{t: t, svc: svc, release: make(chan struct{})}
	t.Cleanup(func() {
		close(s.release)
		s.held.Wait()
	})
	for i := range n {
		eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 4, CapacityBlocks: 256})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		srv, err := eng.ServeHTTP("127.0.0.1:0", simengine.HTTPOptions{CompletionTokens: 2, Metrics: simengine.MetricsVLLM,
			Hold: func(ctx context.Context) {
				select {
				case <-s.release:
				case <-ctx.Done():
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		s.engines, s.servers = append(s.engines, eng), append(s.servers, srv)
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: eng.Endpoint(),
			ModelName: "m", TenantID: "default", ServingEndpoint: srv.ServingEndpoint(), Engine: "vllm"}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// direct sends n streamed requests straight to engine i, around the
// router; they run until the test ends.
func (s *signalled) direct(i, n int) {
	for range n {
		s.held.Add(1)
		go func() {
			defer s.held.Done()
			resp, err := http.Post("http://"+s.servers[i].ServingEndpoint()+"/v1/completions", "application/json",
				strings.NewReader(`{"model":"m","prompt":[9,9,9,9,9,9,9,9],"stream":true}`))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
}

// signalsOf waits until worker w's signals in /workers satisfy ok.
func (s *signalled) signalsOf(w messages.WorkerID, what string, ok func(*api.EngineSignals) bool) *api.EngineSignals {
	s.t.Helper()
	var got *api.EngineSignals
	eventually.True(s.t, what, func() (bool, string) {
		ws, err := s.svc.Workers(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, wi := range ws {
			if wi.InstanceID == w {
				got = wi.Ranks[0].Signals
			}
		}
		return got != nil && ok(got), fmt.Sprintf("%+v", got)
	})
	return got
}

// routeFree routes a fresh prompt and frees it at once (so that the
// booked load does not steer the next one); it returns the answer.
func (s *signalled) routeFree(id int) api.RouteResult {
	s.t.Helper()
	ctx := context.Background()
	res, err := s.svc.Route(ctx, api.RouteRequest{TokenIDs: prompt(id, 4), ModelName: "m", TenantID: "default",
		RequestID: fmt.Sprint("r", id), IncludeScores: true})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.svc.Free(ctx, res.RequestID); err != nil {
		s.t.Fatal(err)
	}
	return res
}

// Traffic sent straight to one engine, around the router, shows in its
// metrics; the router sees it as outside load and routes away from it.
func TestOutsideTrafficRoutesAwayFromTheEngine(t *testing.T) {
	s := newSignalled(t, 2)
	s.direct(0, 4)
	got := s.signalsOf(1, "worker 1 carries outside traffic", func(e *api.EngineSignals) bool { return e.OutsideTraffic })
	if got.OutsideRequests != 4 || got.Running == nil || *got.Running != 4 || got.KVUsageMetric != "vllm:kv_cache_usage_perc" {
		t.Fatalf("worker 1's signals %+v", got)
	}
	if other := s.signalsOf(2, "worker 2 scraped", func(e *api.EngineSignals) bool { return e.Scrapes > 0 }); other.OutsideTraffic {
		t.Fatalf("idle worker 2 flagged: %+v", other)
	}
	for i := range 8 {
		if res := s.routeFree(i); res.WorkerID != 2 {
			t.Fatalf("request %d went to worker %d, whose engine runs 4 requests the router did not send", i, res.WorkerID)
		}
	}
}

// An engine whose metrics stop is saturated once they are stale: the
// router sends nothing there while another engine has room, the request
// path sheds (429) when none has, and the engine is back once its metrics
// are.
func TestStaleMetricsSaturateUntilTheyResume(t *testing.T) {
	s := newSignalled(t, 2)
	path := requestpath.New(s.svc, requestpath.Config{})
	for w := range messages.WorkerID(2) {
		s.signalsOf(w+1, "scraped", func(e *api.EngineSignals) bool { return e.Scrapes > 0 && e.Saturated == "" })
	}
	s.servers[1].StopMetrics(true)
	// Stale at once by age when /workers is read; counted at the next
	// failed scrape after that.
	got := s.signalsOf(2, "worker 2 stale", func(e *api.EngineSignals) bool {
		return e.Saturated == enginesignals.SaturatedStale && e.StaleEvents > 0
	})
	if got.StaleEvents != 1 || got.Failures[string(enginesignals.ReasonStatus)] == 0 {
		t.Fatalf("stale worker 2 %+v", got)
	}
	waitRoute := func(what string, ok func(api.RouteResult) bool) {
		t.Helper()
		id := 100
		eventually.True(t, what, func() (bool, string) {
			id++
			res := s.routeFree(id)
			return ok(res), fmt.Sprintf("%+v", res)
		})
	}
	// The candidates reach the route actor on the next state tick.
	waitRoute("worker 2 scored saturated", func(r api.RouteResult) bool { return saturated(r, 2) })
	for i := range 8 {
		if res := s.routeFree(200 + i); res.WorkerID != 1 {
			t.Fatalf("request %d went to the saturated worker 2", i)
		}
	}
	// Both stale: shed.
	s.servers[0].StopMetrics(true)
	s.signalsOf(1, "worker 1 stale", func(e *api.EngineSignals) bool { return e.Saturated == enginesignals.SaturatedStale })
	waitRoute("both scored saturated", func(r api.RouteResult) bool { return saturated(r, 1) && saturated(r, 2) })
	_, err := path.Route(context.Background(), requestpath.Request{ID: "shed", Model: "m", Tokens: prompt(300, 4)})
	if !errors.Is(err, requestpath.ErrOverloaded) || path.Metrics().Count("decisions", requestpath.OutcomeSaturated, "") != 1 {
		t.Fatalf("every engine saturated: %v", err)
	}
	// Metrics resume: routable again.
	s.servers[0].StopMetrics(false)
	s.servers[1].StopMetrics(false)
	waitRoute("saturation over", func(r api.RouteResult) bool { return !saturated(r, 1) && !saturated(r, 2) })
	b, err := path.Route(context.Background(), requestpath.Request{ID: "ok", Model: "m", Tokens: prompt(301, 4)})
	if err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	b.Done(context.Background())
}

func saturated(r api.RouteResult, w messages.WorkerID) bool {
	for _, sc := range r.Scores {
		if sc.WorkerID == w {
			return sc.Saturated
		}
	}
	return false
}
