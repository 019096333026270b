package service

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// A registration's serving endpoint is shown by /workers, carried by the
// dump's streams (a router bootstrapping from this one keeps it) and
// returned by /route for the chosen rank and every scored candidate; a rank
// registered without one is still routed, with none.
func TestServingEndpointsReachWorkersDumpAndRoute(t *testing.T) {
	svc := registered(t, "http://127.0.0.1:8001", "")
	ctx := context.Background()
	want := map[messages.WorkerID]string{1: "http://127.0.0.1:8001", 2: ""}
	ws, err := svc.Workers(ctx)
	if err != nil || len(ws) != 2 {
		t.Fatalf("workers %+v, %v", ws, err)
	}
	for _, w := range ws {
		if got := w.Ranks[0].ServingEndpoint; got != want[w.InstanceID] {
			t.Errorf("/workers: worker %d serving endpoint %q, want %q", w.InstanceID, got, want[w.InstanceID])
		}
	}
	var streams []api.DumpStream
	if err := svc.Dump(ctx, dumpStreamsOnly{&streams}); err != nil {
		t.Fatal(err)
	}
	for _, st := range streams {
		if st.ServingEndpoint != want[st.WorkerID] {
			t.Errorf("dump: worker %d serving endpoint %q, want %q", st.WorkerID, st.ServingEndpoint, want[st.WorkerID])
		}
	}
	for i, id := range []string{"a", "b"} { // the second lands on the other worker (load)
		res, err := svc.Route(ctx, api.RouteRequest{TokenIDs: []uint32{1, 2, 3, 4}, ModelName: "m", TenantID: "default",
			RequestID: id, IncludeScores: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.ServingEndpoint != want[res.WorkerID] || len(res.Scores) != 2 {
			t.Errorf("route %d: %+v, want worker %d's serving endpoint and 2 scores", i, res, res.WorkerID)
		}
		for _, sc := range res.Scores {
			if sc.ServingEndpoint != want[sc.WorkerID] {
				t.Errorf("route %d: score of worker %d has serving endpoint %q, want %q", i, sc.WorkerID, sc.ServingEndpoint, want[sc.WorkerID])
			}
		}
	}
}

// dumpStreamsOnly keeps a dump's registered streams.
type dumpStreamsOnly struct{ streams *[]api.DumpStream }

func (d dumpStreamsOnly) Namespace(ns api.DumpNamespace) error {
	*d.streams = append(*d.streams, ns.Streams...)
	return nil
}

func (dumpStreamsOnly) Event(messages.RouterEvent) error { return nil }

// Rebook moves a routed request's load onto the rank that served it; the
// namespace's models are listed once.
func TestRebookMovesTheLoad(t *testing.T) {
	svc := registered(t, "", "")
	ctx := context.Background()
	if got := svc.Models(ctx); !slices.Equal(got, []string{"m"}) {
		t.Errorf("models %v, want [m]", got)
	}
	res, err := svc.Route(ctx, api.RouteRequest{TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8}, ModelName: "m", TenantID: "default", RequestID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	other := messages.WorkerKey{Worker: 3 - res.WorkerID}
	if err := svc.Rebook(ctx, "m", "default", "r", other); err != nil {
		t.Fatal(err)
	}
	// The next route sees the load on the other worker: it picks the first.
	next, err := svc.Route(ctx, api.RouteRequest{TokenIDs: []uint32{9, 9, 9, 9}, ModelName: "m", TenantID: "default", RequestID: "s", IncludeScores: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range next.Scores {
		if booked := sc.ActiveDecodeBlocks > 0; booked != (sc.WorkerID == other.Worker) {
			t.Errorf("after rebook: %+v, want the blocks on worker %d only", next.Scores, other.Worker)
		}
	}
	for name, err := range map[string]error{
		"unknown request": svc.Rebook(ctx, "m", "default", "nope", other),
		"unknown worker":  svc.Rebook(ctx, "m", "default", "r", messages.WorkerKey{Worker: 9}),
		"unknown model":   svc.Rebook(ctx, "x", "default", "r", other),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// registered is a service (block size 4) with workers 1, 2, … of model
// "m" registered with the given serving endpoints (no engine behind them).
func registered(t *testing.T, serving ...string) *Service {
	t.Helper()
	svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	for i, ep := range serving {
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1),
			Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", i+1), ModelName: "m", TenantID: "default", ServingEndpoint: ep}); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}
