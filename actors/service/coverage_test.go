package service

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// rebuilding is a local index whose answers say shard 1 of 2 is
// rebuilding, as the cluster index says after a host loss.
type rebuilding struct{ *indexer.Index }

func (r rebuilding) QueryCoverage(q *indexer.QueryRequest, timeout time.Duration) (*indexer.QueryResult, pipeline.Coverage, error) {
	res, err := r.Query(q, timeout)
	return res, pipeline.Coverage{Shards: 2, Recovering: []int{1}}, err
}

// A route answered from partial coverage names the candidate workers whose
// overlap may be too low (those placed on the rebuilding shard).
func TestRouteFlagsRecoveringWorkers(t *testing.T) {
	cfg := Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second}
	cfg.Pipeline.NewIndex = func(env pipeline.IndexEnv) pipeline.Index {
		return rebuilding{indexer.Spawn(env.Root, indexer.Config{Shards: 2}, env.Followers...)}
	}
	svc, err := New(actor.NewActorSystem(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	var want []messages.WorkerID
	for w := range messages.WorkerID(8) {
		err := svc.Register(context.Background(), api.Registration{InstanceID: w, Endpoint: "tcp://127.0.0.1:1",
			ModelName: "llama", TenantID: api.DefaultTenant, BlockSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		if indexer.ShardOf(w, 2) == 1 {
			want = append(want, w)
		}
	}
	if len(want) == 0 || len(want) == 8 {
		t.Fatalf("the placement puts %v on shard 1: the test needs some workers on each shard", want)
	}
	res, err := svc.Route(context.Background(), api.RouteRequest{TokenIDs: prompt(1, 2), ModelName: "llama",
		TenantID: api.DefaultTenant, RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Partial || len(res.Recovering) != len(want) {
		t.Fatalf("partial %v, recovering %v; want the workers of shard 1 %v", res.Partial, res.Recovering, want)
	}
	for i := range want {
		if res.Recovering[i] != want[i] {
			t.Fatalf("recovering %v, want %v", res.Recovering, want)
		}
	}
}

// A local index answers for every worker: no route is partial.
func TestLocalRoutesAreComplete(t *testing.T) {
	svc, _ := newRouter(t)
	newEngine(t, svc, 1, 0)
	res, err := svc.Route(context.Background(), api.RouteRequest{TokenIDs: prompt(1, 2), ModelName: "llama",
		TenantID: api.DefaultTenant, RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Partial || res.Recovering != nil {
		t.Fatalf("local route flagged partial: %+v", res)
	}
}
