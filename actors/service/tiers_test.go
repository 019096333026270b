package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// The same prefix on one worker's host memory and on the other's GPU, at
// equal (zero) load: the GPU copy wins whichever worker holds it, and
// /route still reports the whole physical overlap; at equal weights the
// tie-break (the prompt's hash) picks the same worker whichever tier it
// holds, so the tier alone decided.
func TestRouteCreditsTheFasterTier(t *testing.T) {
	p := prompt(3, 8)
	route := func(weights *TierWeights, mediums ...string) api.RouteResult {
		t.Helper()
		svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second, TierWeights: weights})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		var engines []*simengine.Engine
		for i, medium := range mediums {
			eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
				BlockSize: 4, CapacityBlocks: 64, Medium: medium})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close() })
			engines = append(engines, eng)
			if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: eng.Endpoint(),
				ReplayEndpoint: eng.ReplayEndpoint(), ModelName: "llama", TenantID: api.DefaultTenant, BlockSize: 4}); err != nil {
				t.Fatal(err)
			}
			eng.Serve(p, "")
		}
		eventually.True(t, "both workers hold the prompt", func() (bool, string) {
			q, err := svc.Query(context.Background(), api.QueryRequest{TokenIDs: p, ModelName: "llama"})
			for _, e := range engines {
				_ = e.Publish()
			}
			return err == nil && q.Scores[1][0] == 32 && q.Scores[2][0] == 32, fmt.Sprint(q.Scores, err)
		})
		res, err := svc.Route(context.Background(), api.RouteRequest{TokenIDs: p, ModelName: "llama", TenantID: api.DefaultTenant, RequestID: "r"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for gpu, mediums := range [][]string{{"GPU", "CPU"}, {"CPU", "GPU"}} {
		if res := route(nil, mediums...); int(res.WorkerID) != gpu+1 || res.OverlapBlocks != 8 || res.CachedTokens != 32 || res.OverlapByTier["device"] != 8 {
			t.Errorf("default weights, mediums %v: %+v, want worker %d (GPU) with its 8 blocks", mediums, res, gpu+1)
		}
	}
	equal := TierWeights{1, 1, 1, 1}
	a, b := route(&equal, "GPU", "CPU"), route(&equal, "CPU", "GPU")
	if a.WorkerID != b.WorkerID || a.OverlapBlocks != 8 || b.OverlapBlocks != 8 {
		t.Errorf("equal weights: %+v then %+v, want the same worker (the tie-break) both times", a, b)
	}
}

func TestParseTierWeights(t *testing.T) {
	w, err := ParseTierWeights("host=0.5, disk=0")
	if err != nil || w != (TierWeights{1, 0.5, 0, 0.25}) {
		t.Fatalf("host=0.5,disk=0: %v %v", w, err)
	}
	if w, err := ParseTierWeights(""); err != nil || w != DefaultTierWeights {
		t.Fatalf("empty: %v %v", w, err)
	}
	for _, bad := range []string{"gpu=1", "host", "host=2", "host=-0.1", "host=NaN", "host=x"} {
		if _, err := ParseTierWeights(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got, err := ParseTierWeights(DefaultTierWeights.String()); err != nil || got != DefaultTierWeights {
		t.Errorf("String does not parse back: %q → %v %v", DefaultTierWeights.String(), got, err)
	}
}
