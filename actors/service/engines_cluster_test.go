//go:build !race

package service

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// In a cluster (without -race: reach_cluster_test.go says why) a
// registration's engine reaches every member through the replicated
// registry, and what the owner's stream showed reaches the others through
// its stream states: each member's /workers shows the same engine,
// detection and evidence for each rank, whichever member follows it.
func TestClusterCarriesTheEngines(t *testing.T) {
	t.Parallel()
	hs := startMembers(t, [2]string{"127.0.0.1:0", ""}, [2]string{"127.0.0.1:0", ""})
	var engines []*simengine.Engine
	for i, engine := range []string{"", "sglang"} {
		f := families[i]
		opts := f.opts
		opts.Endpoint, opts.ReplayEndpoint, opts.BlockSize, opts.CapacityBlocks = "tcp://127.0.0.1:0", "tcp://127.0.0.1:0", 4, 64
		eng, err := simengine.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		eng.Serve(prompt(i+1, 3), f.session)
		engines = append(engines, eng)
		if err := hs[i].Service.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(10 + i),
			Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(), ModelName: "llama", TenantID: api.DefaultTenant,
			BlockSize: 4, Engine: engine}); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct{ engine, detected string }{{"auto", "vllm"}, {"sglang", "sglang"}}
	for m, h := range hs {
		eventually.True(t, fmt.Sprintf("member %d shows both engines", m), func() (bool, string) {
			ws, err := h.Service.Workers(context.Background())
			ok := err == nil && len(ws) == 2
			for i := 0; ok && i < 2; i++ {
				r := ws[i].Ranks[0]
				ok = r.Engine == want[i].engine && r.EngineDetected == want[i].detected && r.EngineEvidence != ""
			}
			if !ok {
				for _, e := range engines {
					_ = e.Publish()
				}
			}
			return ok, fmt.Sprintf("%+v %v", ws, err)
		})
	}
}
