package service

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// newRouter is a served, empty service with a 2-shard index.
func newRouter(t *testing.T) (*Service, string) {
	t.Helper()
	cfg := Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second}
	cfg.Pipeline.Index.Shards = 2
	svc, err := New(actor.NewActorSystem(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	t.Cleanup(srv.Close)
	return svc, srv.URL
}

// newEngine is a simulated engine with replay, registered on svc as worker id.
func newEngine(t *testing.T, svc *Service, id int, buffer int) *simengine.Engine {
	t.Helper()
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		BlockSize: 4, CapacityBlocks: 64, ReplayBuffer: buffer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if svc != nil {
		err = svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(id), Endpoint: eng.Endpoint(),
			ReplayEndpoint: eng.ReplayEndpoint(), ModelName: "llama", TenantID: api.DefaultTenant, BlockSize: 4})
		if err != nil {
			t.Fatal(err)
		}
	}
	return eng
}

// blocks is a router's index of worker id, sorted.
func blocks(t *testing.T, svc *Service, id int) []messages.ExternalHash {
	t.Helper()
	ns, err := svc.lookup("llama", api.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := ns.pipe.Snapshot(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Blocks[messages.WorkerKey{Worker: messages.WorkerID(id)}]
}

// truth is what an engine holds, sorted.
func truth(eng *simengine.Engine) []messages.ExternalHash {
	return eng.Contents().Held()
}

// streamState is worker id's state and listener resyncs on svc.
func streamState(t *testing.T, svc *Service, id int) (api.StreamState, map[string]uint64) {
	t.Helper()
	ws, err := svc.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := svc.lookup("llama", api.DefaultTenant)
	ls, err := ns.pipe.ListenerStats(messages.StreamID{Worker: messages.WorkerID(id)}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.InstanceID == messages.WorkerID(id) {
			return w.Ranks[0].State, ls.Resyncs
		}
	}
	t.Fatalf("worker %d not registered", id)
	return "", nil
}

// beatUntil waits until cond holds (eventually.True), publishing a
// heartbeat on every engine after each miss so that the routers see the
// engines' last batches.
func beatUntil(t *testing.T, engines []*simengine.Engine, what string, cond func() (bool, string)) {
	t.Helper()
	eventually.True(t, what, func() (bool, string) {
		ok, why := cond()
		if !ok {
			for _, e := range engines {
				_ = e.Publish()
			}
		}
		return ok, why
	})
}

// subscribed waits until svc's listener of worker id has caught up with
// eng (heartbeats): subscribed, no replay running, at eng's next seq, the
// stream exact. Only then is nothing eng serves next lost to a late
// subscription or raced against a start-up replay that a small replay
// buffer would outrun.
func subscribed(t *testing.T, svc *Service, eng *simengine.Engine, id int) {
	t.Helper()
	ns, _ := svc.lookup("llama", api.DefaultTenant)
	beatUntil(t, []*simengine.Engine{eng}, "subscribed", func() (bool, string) {
		ls, err := ns.pipe.ListenerStats(messages.StreamID{Worker: messages.WorkerID(id)}, time.Second)
		if err != nil {
			return false, err.Error()
		}
		st, _ := streamState(t, svc, id)
		return ls.Received > 0 && !ls.Recovering() && ls.NextSeq == eng.Stats().NextSeq && st == api.StateExact,
			fmt.Sprintf("received %d, recovering %v, next seq %d (engine %d), state %s",
				ls.Received, ls.Recovering(), ls.NextSeq, eng.Stats().NextSeq, st)
	})
}

func serve(t *testing.T, eng *simengine.Engine, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		eng.Serve(prompt(i, 3+i%4), "")
	}
}

// A router started late loads a peer's dump, resumes every stream where
// the dump stands and follows the engines from there: it answers like the
// peer at once, keeps the peer's exact state, and tracks what the engines
// do next.
func TestBootstrapResumesFromAPeer(t *testing.T) {
	a, aURL := newRouter(t)
	engines := []*simengine.Engine{newEngine(t, a, 1, 0), newEngine(t, a, 2, 0)}
	for i, e := range engines {
		serve(t, e, 100*i, 12)
	}
	beatUntil(t, engines, "peer caught up", func() (bool, string) {
		for i, e := range engines {
			if !slices.Equal(blocks(t, a, i+1), truth(e)) {
				return false, fmt.Sprintf("worker %d: index %d blocks, engine %d", i+1, len(blocks(t, a, i+1)), len(truth(e)))
			}
		}
		return true, ""
	})

	b, _ := newRouter(t)
	rep, err := b.Bootstrap(context.Background(), aURL, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Resumed != 2 || rep.Fresh != 0 || rep.Namespaces != 1 || rep.Events == 0 {
		t.Fatalf("report %+v, want 2 streams resumed", rep)
	}
	for i, e := range engines {
		if got := blocks(t, b, i+1); !slices.Equal(got, truth(e)) {
			t.Fatalf("worker %d right after the bootstrap: %d blocks, engine holds %d", i+1, len(got), len(truth(e)))
		}
	}
	for i, e := range engines {
		serve(t, e, 100*i+50, 12) // evicts some of what was loaded
	}
	beatUntil(t, engines, "bootstrapped router follows the engines", func() (bool, string) {
		for i, e := range engines {
			st, resyncs := streamState(t, b, i+1)
			if got := blocks(t, b, i+1); !slices.Equal(got, truth(e)) || st != api.StateExact {
				return false, fmt.Sprintf("worker %d: %s, resyncs %v, %d blocks indexed, engine holds %d", i+1, st, resyncs, len(got), len(truth(e)))
			}
			if resyncs["resumed"] != 1 || len(resyncs) != 1 {
				return false, fmt.Sprintf("worker %d resyncs %v, want only the resume", i+1, resyncs)
			}
		}
		return true, ""
	})
}

// When the engine's replay buffer no longer holds the batches after the
// dumped position, the resumed stream drops what it loaded and is degraded;
// it never reports a block the engine evicted.
func TestBootstrapAfterTheBufferMovedOn(t *testing.T) {
	a, aURL := newRouter(t)
	eng := newEngine(t, a, 1, 4)
	subscribed(t, a, eng, 1)
	serve(t, eng, 0, 10)
	beatUntil(t, []*simengine.Engine{eng}, "peer caught up", func() (bool, string) {
		return slices.Equal(blocks(t, a, 1), truth(eng)), "not yet"
	})
	// The dump is taken now; then the engine publishes more than its
	// buffer holds before the late router resumes.
	resp, err := http.Get(aURL + "/dump")
	if err != nil {
		t.Fatal(err)
	}
	dump := httptest.NewRecorder()
	_, _ = dump.Body.ReadFrom(resp.Body)
	resp.Body.Close()
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(dump.Body.Bytes()) }))
	defer old.Close()
	serve(t, eng, 500, 20)

	b, _ := newRouter(t)
	if rep, err := b.Bootstrap(context.Background(), old.URL, ""); err != nil || rep.Resumed != 1 {
		t.Fatalf("bootstrap: %+v, %v", rep, err)
	}
	held := map[messages.ExternalHash]bool{}
	beatUntil(t, []*simengine.Engine{eng}, "stream degraded, no phantom", func() (bool, string) {
		clear(held)
		for _, h := range truth(eng) {
			held[h] = true
		}
		got := blocks(t, b, 1)
		for _, h := range got {
			if !held[h] {
				return false, fmt.Sprintf("block %d indexed but evicted", h)
			}
		}
		st, resyncs := streamState(t, b, 1)
		return st == api.StateDegraded && resyncs["history_missing"] > 0,
			fmt.Sprintf("state %s, resyncs %v", st, resyncs)
	})
}

// A dumped stream without a position starts afresh: the state the dump
// held for its worker (here a block the engine never had) is dropped before
// the listener starts, and the stream is rebuilt from the engine.
func TestBootstrapWithoutPositionDropsTheLoadedState(t *testing.T) {
	eng := newEngine(t, nil, 1, 0)
	serve(t, eng, 0, 6)
	doc := fmt.Sprintf(`{"llama:default":{"model_name":"llama","tenant_id":"default","block_size":4,
		"streams":[{"worker_id":1,"dp_rank":0,"endpoint":%q,"replay_endpoint":%q}],"events":[
		{"worker_id":1,"storage_tier":"device","event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":424242,"tokens_hash":7}]}},"dp_rank":0}}
		]}}`, eng.Endpoint(), eng.ReplayEndpoint())
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(doc)) }))
	defer peer.Close()
	b, _ := newRouter(t)
	rep, err := b.Bootstrap(context.Background(), peer.URL, "")
	if err != nil || rep.Fresh != 1 || rep.Resumed != 0 || rep.Events != 1 {
		t.Fatalf("bootstrap: %+v, %v", rep, err)
	}
	beatUntil(t, []*simengine.Engine{eng}, "rebuilt from the engine", func() (bool, string) {
		got := blocks(t, b, 1)
		return slices.Equal(got, truth(eng)), fmt.Sprintf("%d blocks indexed (%v), engine %d", len(got), slices.Contains(got, 424242), len(truth(eng)))
	})
}

func TestBootstrapRefusals(t *testing.T) {
	b, _ := newRouter(t)
	for _, peer := range []string{"", "ftp://x", "http://", "localhost:1"} {
		if _, err := b.Bootstrap(context.Background(), peer, ""); err == nil {
			t.Errorf("peer %q accepted", peer)
		}
	}
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"nope"}`, http.StatusUnauthorized)
	}))
	defer peer.Close()
	if _, err := b.Bootstrap(context.Background(), peer.URL, ""); err == nil {
		t.Error("a 401 from the peer was accepted")
	}
	newEngine(t, b, 1, 0)
	if _, err := b.Bootstrap(context.Background(), peer.URL, ""); err == nil {
		t.Error("a router with registered workers bootstrapped")
	}
}
