package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// The picker's readiness waits for the index to sync its workers: not
// synced while a registered engine is down, synced once it is up and its
// start-up replay applied, and synced for good: a lost connection later is
// a partial answer, and a worker registered later (its engine down) does
// not take the picker out of rotation.
func TestSyncedWaitsForTheWorkers(t *testing.T) {
	svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second,
		SyncGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx := context.Background()
	if err := svc.Synced(ctx); err != nil {
		t.Fatalf("no workers: %v, want synced", err)
	}
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		BlockSize: 4, CapacityBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, replay := eng.Endpoint(), eng.ReplayEndpoint()
	if err := eng.Close(); err != nil { // the engine is down at registration
		t.Fatal(err)
	}
	if err := svc.Register(ctx, api.Registration{InstanceID: 1, Endpoint: endpoint, ReplayEndpoint: replay,
		ModelName: "m", TenantID: "default"}); err != nil {
		t.Fatal(err)
	}
	err = svc.Synced(ctx)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Reason != reasonWorkersSyncing {
		t.Fatalf("engine down: %v, want %s", err, reasonWorkersSyncing)
	}
	eng, err = simengine.New(simengine.Options{Endpoint: endpoint, ReplayEndpoint: replay, BlockSize: 4, CapacityBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	eng.Serve(prompt(1, 4), "")
	eventually.True(t, "synced once the engine is up", func() (bool, string) {
		err := svc.Synced(ctx)
		_ = eng.Publish()
		return err == nil, errString(err)
	})
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the listener sees the engine gone", func() (bool, string) {
		svc.mu.Lock()
		pipe := svc.workers[messages.WorkerKey{Worker: 1}].ns.pipe
		svc.mu.Unlock()
		ls, err := pipe.ListenerStats(messages.StreamID{Worker: 1}, time.Second)
		return err == nil && ls.Recovering(), errString(err)
	})
	if err := svc.Synced(ctx); err != nil {
		t.Errorf("engine lost after its sync: %v, want still synced", err)
	}
	if err := svc.Register(ctx, api.Registration{InstanceID: 2, Endpoint: endpoint, ModelName: "m",
		TenantID: "default"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Synced(ctx); err != nil {
		t.Errorf("a worker registered after the start-up sync, its engine down: %v, want still synced", err)
	}
}

// A worker that has not synced within SyncGrace stops holding readiness
// back: one engine down at start cannot keep traffic from the others.
func TestSyncGraceBoundsTheWait(t *testing.T) {
	svc, err := New(actor.NewActorSystem(), Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second,
		SyncGrace: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx := context.Background()
	if err := svc.Register(ctx, api.Registration{InstanceID: 1, Endpoint: "tcp://127.0.0.1:1",
		ModelName: "m", TenantID: "default"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Synced(ctx); err != nil {
		t.Errorf("past the grace: %v, want synced", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "synced"
	}
	return err.Error()
}
