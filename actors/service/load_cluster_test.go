//go:build !race

package service

import (
	"context"

	"fmt"
	"github.com/asynkron/protoactor-go/actor"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// In a cluster (without -race: reach_cluster_test.go says why) the load a
// member books reaches the others with its request count, the number
// behind the cost's cache falloff: three requests routed on member 0 are
// three remote requests on member 1's candidate; prefill_done keeps the
// request booked, free drops it.
func TestClusterSharesRequestCounts(t *testing.T) {
	t.Parallel()
	hs := startMembers(t, [2]string{"127.0.0.1:0", ""}, [2]string{"127.0.0.1:0", ""})
	opts := families[0].opts
	opts.Endpoint, opts.ReplayEndpoint, opts.BlockSize, opts.CapacityBlocks = "tcp://127.0.0.1:0", "tcp://127.0.0.1:0", 4, 64
	eng, err := simengine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	key := messages.WorkerKey{Worker: 10}
	if err := hs[0].Service.Register(context.Background(), api.Registration{InstanceID: key.Worker,
		Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(), ModelName: "llama", TenantID: api.DefaultTenant,
		BlockSize: 4}); err != nil {
		t.Fatal(err)
	}
	remote := func(want int64) {
		t.Helper()
		eventually.True(t, fmt.Sprintf("member 1 sees %d remote requests", want), func() (bool, string) {
			hs[1].Service.mu.Lock()
			r, ok := hs[1].Service.remote[key]
			hs[1].Service.mu.Unlock()
			return ok && r.Requests == want, fmt.Sprintf("remote load %+v (known %v)", r, ok)
		})
	}
	for i := range 3 {
		eventually.True(t, "member 0 routes", func() (bool, string) {
			res, err := hs[0].Service.Route(context.Background(), api.RouteRequest{TokenIDs: prompt(i+1, 2),
				ModelName: "llama", TenantID: api.DefaultTenant, RequestID: fmt.Sprint("r", i)})
			return err == nil && res.WorkerID == key.Worker, fmt.Sprintf("%+v %v", res, err)
		})
	}
	remote(3)
	if err := hs[0].Service.PrefillDone(context.Background(), "r0"); err != nil {
		t.Fatal(err)
	}
	if err := hs[0].Service.Free(context.Background(), "r1"); err != nil {
		t.Fatal(err)
	}
	remote(2)
	// Every delta member 0 pushed (three bookings, the prefill_done's and
	// the free's releases) was applied on member 1, and the counters say so.
	counts := func(h *Host) string {
		var b strings.Builder
		if err := h.Service.LoadDeltaMetrics(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	eventually.True(t, "member 1 applied every delta member 0 sent", func() (bool, string) {
		sent, got := counts(hs[0]), counts(hs[1])
		return strings.Contains(sent, "kvrouter_cluster_load_deltas_sent_total 5\n") &&
			strings.Contains(got, `kvrouter_cluster_load_deltas_received_total{result="applied"} 5`+"\n") &&
			strings.Contains(got, `kvrouter_cluster_load_deltas_received_total{result="dropped"} 0`+"\n"), sent + got
	})
}

// A breaker trip one member pushes reaches the other's request path (as
// kvrouter serve wires ShareBreakerTrips), and one host pushes nothing.
func TestClusterSharesBreakerTrips(t *testing.T) {
	t.Parallel()
	hs := startMembers(t, [2]string{"127.0.0.1:0", ""}, [2]string{"127.0.0.1:0", ""})
	got := make(chan string, 64)
	hs[1].Service.ShareBreakerTrips(func(ep string) { got <- ep })
	push := hs[0].Service.ShareBreakerTrips(func(string) {})
	if push == nil {
		t.Fatal("a cluster member has nothing to push trips with")
	}
	alone, err := New(actor.NewActorSystem(), Config{BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	if alone.ShareBreakerTrips(func(string) {}) != nil {
		t.Fatal("one host has trips to push")
	}
	eventually.True(t, "member 1 hears member 0's trip", func() (bool, string) {
		push("10.0.0.7:8000") // again until the members know each other
		select {
		case ep := <-got:
			return ep == "10.0.0.7:8000", ep
		default:
			return false, "nothing yet"
		}
	})
}

// A prediction made on member 0 steers a sibling routed by member 1: the
// first request of a shared prefix goes to some worker, whose engine has
// not published anything yet; member 1 routes a sibling there on the
// prediction alone (predicted_blocks), before any event arrives.
func TestClusterSharesPredictions(t *testing.T) {
	t.Parallel()
	hs := startMembers(t, [2]string{"127.0.0.1:0", ""}, [2]string{"127.0.0.1:0", ""})
	opts := families[0].opts
	opts.Endpoint, opts.ReplayEndpoint, opts.BlockSize, opts.CapacityBlocks = "tcp://127.0.0.1:0", "tcp://127.0.0.1:0", 4, 64
	for i := range 3 {
		eng, err := simengine.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		if err := hs[0].Service.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(10 + i),
			Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(), ModelName: "llama", TenantID: api.DefaultTenant,
			BlockSize: 4}); err != nil {
			t.Fatal(err)
		}
	}
	prefix := prompt(5, 16)
	sibling := func(seed int) []uint32 { return append(append([]uint32(nil), prefix...), prompt(seed, 1)...) }
	route := func(h *Host, id string, p []uint32) (api.RouteResult, error) {
		return h.Service.Route(context.Background(), api.RouteRequest{TokenIDs: p, ModelName: "llama", TenantID: api.DefaultTenant,
			RequestID: id, IncludeScores: true})
	}
	eventually.True(t, "member 1 sees the three workers", func() (bool, string) {
		res, err := route(hs[1], "probe", prompt(9, 1))
		_ = hs[1].Service.Free(context.Background(), "probe")
		return err == nil && len(res.Scores) == 3, fmt.Sprintf("%+v %v", res, err)
	})
	first, err := route(hs[0], "first", sibling(6))
	if err != nil {
		t.Fatal(err)
	}
	// Routing siblings on member 1 before the push arrived would make
	// predictions of its own: wait for the push, then route one.
	eventually.True(t, "member 1 received member 0's prediction", func() (bool, string) {
		var m strings.Builder
		err := hs[1].Service.LoadDeltaMetrics(&m)
		return err == nil && strings.Contains(m.String(), `kvrouter_cluster_predictions_received_total{result="applied"} 1`+"\n"), m.String()
	})
	res, err := route(hs[1], "sibling", sibling(7))
	if err != nil || res.WorkerID != first.WorkerID || res.PredictedBlocks < 16 || res.OverlapBlocks != 0 {
		t.Fatalf("first on %d; the sibling on member 1: %+v %v, want the same worker on 16 predicted blocks", first.WorkerID, res, err)
	}
}
