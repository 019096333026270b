package requestpath

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Two hosts' guards wired as kvrouter serve wires them through the
// cluster: host A's breaker for h1:1 opens on the failures A saw and is
// pushed once; host B, which saw none, opens its own at once and routes
// around h1:1; B never pushes a trip it received back; after its own
// cool-down B probes h1:1 itself.
func TestBreakerTripsCrossHosts(t *testing.T) {
	clk := frontendtest.NewClock()
	cfg := GuardConfig{Breaker: guard.BreakerConfig{Failures: 2, ErrorRate: -1, CoolDown: time.Minute, Successes: 1}}
	ga, gb := newGuard(t, clk, cfg), newGuard(t, clk, cfg)
	var fromA, fromB []string
	ga.ShareTrips(func(ep string) { fromA = append(fromA, ep); gb.RemoteTrip(ep) })
	gb.ShareTrips(func(ep string) { fromB = append(fromB, ep); ga.RemoteTrip(ep) })
	pa := New(&fakeBackend{answer: threeWorkers()}, Config{Guard: ga})
	pb := New(&fakeBackend{answer: threeWorkers()}, Config{Guard: gb})
	route(t, pa, "a1", EndpointStatus5xx)
	if len(fromA) != 0 || !gb.Admits("h1:1") {
		t.Fatalf("one failure: pushed %v, B admits h1:1 %v", fromA, gb.Admits("h1:1"))
	}
	route(t, pa, "a2", EndpointConnectFailed)
	if len(fromA) != 1 || fromA[0] != "h1:1" {
		t.Fatalf("A's breaker opened: pushed %v, want [h1:1] once", fromA)
	}
	b, err := pb.Route(context.Background(), Request{ID: "b1", Model: "m", Tokens: []uint32{1}})
	if err != nil || b.Candidates[0].Endpoint.HostPort == "h1:1" {
		t.Fatalf("B after A's trip: %v %+v, want h1:1 skipped", err, b)
	}
	b.Done(context.Background())
	if len(fromB) != 0 {
		t.Fatalf("B pushed %v: a received trip must not travel on", fromB)
	}
	if info := gb.RankBreaker(api.RankInfo{ServingEndpoint: "h1:1"}); info == nil || info.State != "open" {
		t.Fatalf("B's breaker for h1:1: %+v, want open", info)
	}
	var m strings.Builder
	if err := gb.WriteMetrics(&m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.String(), `kvrouter_breaker_shared_trips_total{direction="received"} 1`) {
		t.Errorf("B's metrics lack the received trip:\n%s", m.String())
	}
	clk.Advance(time.Minute)
	probe, err := pb.Route(context.Background(), Request{ID: "b2", Model: "m", Tokens: []uint32{1}})
	if err != nil || probe.Candidates[0].Endpoint.HostPort != "h1:1" {
		t.Fatalf("B after its cool-down: %v %+v, want its own probe to h1:1", err, probe)
	}
	probe.Report(0, EndpointOK)
	probe.Done(context.Background())
	if info := gb.RankBreaker(api.RankInfo{ServingEndpoint: "h1:1"}); info.State != "closed" {
		t.Fatalf("B after its probe passed: %+v", info)
	}
}
