package loadgen

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// A stream that lost its start is degraded and stays so by itself; the
// setup's wait re-syncs it through its (empty) engine's AllBlocksCleared
// and counts the clear. The engine here starts at seq 7 without a replay
// endpoint: its first batch is a gap nothing can fill.
func TestAwaitExactReSyncsDegradedStream(t *testing.T) {
	cfg := clusterConfig{Workers: 1, BlockSize: 16, Capacity: 64, Shards: 1, Routing: routing.DefaultConfig(),
		Logger: slog.New(slog.DiscardHandler)}
	hosts, err := startHosts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{cfg: cfg, hosts: hosts, stopHB: make(chan struct{})}
	t.Cleanup(c.close)
	e, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 16, CapacityBlocks: 64, SeqStart: 7, HashSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.engines = append(c.engines, e)
	if err := c.hosts[0].Service.Register(context.Background(), api.Registration{InstanceID: 1, Endpoint: e.Endpoint(),
		ModelName: benchModel, BlockSize: 16}); err != nil {
		t.Fatal(err)
	}
	// Heartbeats until the listener hears one (its subscription takes a
	// moment): the stream is then degraded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := e.Publish(); err != nil {
			t.Fatal(err)
		}
		st, err := c.streamStates()
		if err == nil && len(st.degraded) == 1 && st.degraded[0] == messages.WorkerID(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream never became degraded (%v, err %v)", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.awaitExact(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if c.setupClears < 1 {
		t.Fatalf("exact with %d setup clears, want at least 1", c.setupClears)
	}
	if bad, _, err := c.streams(); err != nil || bad != 0 {
		t.Fatalf("after the wait: %d streams not exact (err %v)", bad, err)
	}
}
