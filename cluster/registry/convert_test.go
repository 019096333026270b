package registry

import (
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// Booked loads cross members as protobuf and come back equal; a peer's
// entry without a key or with negative sums is dropped (it must not lower
// anyone's load).
func TestLoadsRoundTrip(t *testing.T) {
	in := []RankLoad{
		{Key: messages.WorkerKey{Worker: 1}, PrefillTokens: 48, Blocks: 12, Requests: 2},
		{Key: messages.WorkerKey{Worker: 2, DpRank: 1}, Blocks: 3, Requests: 1},
	}
	ps := fromLoads(in)
	if got := toLoads(ps); !slices.Equal(got, in) {
		t.Errorf("round trip: %+v, want %+v", got, in)
	}
	bad := append(ps,
		&clusterpb.RankLoad{PrefillTokens: 5},
		&clusterpb.RankLoad{Key: clusterpb.FromKey(messages.WorkerKey{Worker: 3}), Blocks: -1},
		&clusterpb.RankLoad{Key: clusterpb.FromKey(messages.WorkerKey{Worker: 4}), PrefillTokens: -7},
		&clusterpb.RankLoad{Key: clusterpb.FromKey(messages.WorkerKey{Worker: 5}), Requests: -1},
	)
	if got := toLoads(bad); !slices.Equal(got, in) {
		t.Errorf("with bad entries: %+v, want %+v", got, in)
	}
}

// Registry entries cross members with every registration field, the
// serving endpoint, the engine and an event-less worker's mode and cache
// size included; an entry without a key is
// counted rejected.
func TestEntriesRoundTrip(t *testing.T) {
	in := []Entry{
		{Key: messages.WorkerKey{Worker: 1, DpRank: 2}, Worker: Worker{Model: "m", Tenant: "t", BlockSize: 16,
			Endpoint: "tcp://e:1", ReplayEndpoint: "tcp://e:2", Lora: "l", ServingEndpoint: "http://e:8000",
			Engine: "sglang", MetricsEndpoint: "http://e:8000/m", Role: "prefill", BootstrapHost: "e", BootstrapPort: 8998},
			Version: Version{Clock: 7, Origin: "a:1"}},
		{Key: messages.WorkerKey{Worker: 3}, Worker: Worker{Model: "m", Endpoint: "tcp://f:1"}, Deleted: true},
		{Key: messages.WorkerKey{Worker: 4}, Worker: Worker{Model: "m", ServingEndpoint: "g:8000", Events: "none", CacheBlocks: 512}},
	}
	ps := append(fromEntries(in), &clusterpb.RegistryEntry{Model: "no key"})
	got, rejected := toEntries(ps)
	if !slices.Equal(got, in) || rejected != 1 {
		t.Errorf("round trip: %+v (%d rejected), want %+v (1 rejected)", got, rejected, in)
	}
	// A bootstrap port no uint16 holds is read as none.
	got, _ = toEntries([]*clusterpb.RegistryEntry{{Key: clusterpb.FromKey(messages.WorkerKey{Worker: 9}), BootstrapPort: 70000}})
	if len(got) != 1 || got[0].Worker.BootstrapPort != 0 {
		t.Errorf("port 70000: %+v", got)
	}
}
