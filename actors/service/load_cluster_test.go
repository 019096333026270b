//go:build !race

package service

import (
	"context"
	"fmt"
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
