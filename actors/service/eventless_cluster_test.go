//go:build !race

package service

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// Event-less workers in a cluster (without -race: reach_cluster_test.go
// says why): registered on either member, they exist on both, with no
// owner and nothing to follow; a request member 1 routes to one of them
// steers a sibling member 0 routes a moment later to the same worker, on
// the prediction member 1 pushed (predicted_blocks), and member 0's
// /workers shows the approximate cache it holds from that push.
func TestClusterRoutesEventLessWorkers(t *testing.T) {
	t.Parallel()
	hs := startMembers(t, [2]string{"127.0.0.1:0", ""}, [2]string{"127.0.0.1:0", ""})
	for i := range 3 {
		if err := hs[i%2].Service.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(10 + i),
			ModelName: "llama", TenantID: api.DefaultTenant, BlockSize: 4, Events: api.EventsNone, CacheBlocks: 64,
			ServingEndpoint: fmt.Sprintf("127.0.0.1:%d", 8000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	route := func(h *Host, id string, p []uint32) (api.RouteResult, error) {
		return h.Service.Route(context.Background(), api.RouteRequest{TokenIDs: p, ModelName: "llama", TenantID: api.DefaultTenant,
			RequestID: id, IncludeScores: true})
	}
	for i, h := range hs {
		eventually.True(t, fmt.Sprintf("member %d sees the three workers", i), func() (bool, string) {
			res, err := route(h, "probe", prompt(9, 1))
			_ = h.Service.Free(context.Background(), "probe")
			return err == nil && len(res.Scores) == 3, fmt.Sprintf("%+v %v", res, err)
		})
	}
	prefix := prompt(5, 16)
	sibling := func(seed int) []uint32 { return append(append([]uint32(nil), prefix...), prompt(seed, 1)...) }
	first, err := route(hs[1], "first", sibling(6))
	if err != nil || first.PredictedBlocks != 0 {
		t.Fatalf("the first request on member 1: %+v %v, want a cold route", first, err)
	}
	// Member 0 holds the 17 blocks in its copy of the worker's cache once
	// the push arrived (the probes added one block at most).
	rank := func(id messages.WorkerID) api.RankInfo {
		ws, err := hs[0].Service.Workers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rankOf(ws, int(id))
	}
	eventually.True(t, "member 0 received member 1's prediction", func() (bool, string) {
		r := rank(first.WorkerID)
		return r.Blocks >= 17, fmt.Sprintf("%+v", r)
	})
	res, err := route(hs[0], "sibling", sibling(7))
	if err != nil || res.WorkerID != first.WorkerID || res.PredictedBlocks < 16 || res.OverlapBlocks != 0 {
		t.Fatalf("first on %d by member 1; the sibling on member 0: %+v %v, want the same worker on 16 predicted blocks",
			first.WorkerID, res, err)
	}
	for i := range 3 {
		r := rank(messages.WorkerID(10 + i))
		if r.Mode != api.ModePredictions || r.State != api.StateApproximate || r.Owner != "" || r.CacheBlocks != 64 || len(r.Warnings) != 0 {
			t.Errorf("member 0's /workers, worker %d: %+v, want mode predictions, approximate, no owner, 64 cache blocks, no warning", 10+i, r)
		}
	}
}
