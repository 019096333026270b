package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"github.com/kvrouter/kvrouter/messages/wire"
)

// stuckGate sits in the pipeline — between a listener and the normalizers,
// or between the coalescers and the index — and while closed holds the
// batches (a consumer that stopped); openGate releases them in order and
// lets the rest through.
type stuckGate struct {
	next   *actor.PID
	closed bool
	held   []any
}

type openGate struct{}

func (g *stuckGate) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.EngineBatch, *messages.RouterEventBatch:
		if g.closed {
			g.held = append(g.held, m)
			return
		}
		ctx.Send(g.next, m)
	case openGate:
		for _, b := range g.held {
			ctx.Send(g.next, b)
		}
		g.held, g.closed = nil, false
	}
}

func ask[T any](t *testing.T, system *actor.ActorSystem, pid *actor.PID, msg any) T {
	t.Helper()
	res, err := system.Root.RequestFuture(pid, msg, time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return res.(T)
}

// A consumer that stops acknowledging — the normalizers, or the index
// behind the coalescers — : the listener's credit window bounds the
// batches in flight however much the engine publishes, the hop's PUB
// drops past its high-water mark, and once the consumer resumes the stream
// recovers by replay to the engine's exact cache.
func TestStuckConsumerIsBoundedAndRecovers(t *testing.T) {
	for _, at := range []string{"normalizers", "index"} {
		t.Run(at, func(t *testing.T) { stuckConsumer(t, at) })
	}
}

// stuckConsumer runs TestStuckConsumerIsBoundedAndRecovers with the gate
// in front of the normalizers or of the index.
func stuckConsumer(t *testing.T, at string) {
	const window = 16
	system := quietSystem(t)
	root := system.Root
	index := indexer.Spawn(root, indexer.Config{})
	t.Cleanup(index.Stop)
	closed := func(next *actor.PID) *actor.PID {
		return root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &stuckGate{next: next, closed: true} }))
	}
	var gate, hub, next *actor.PID
	if at == "index" {
		gate = closed(index.PID())
		hub = root.Spawn(coalescer.HubProps(gate, coalescer.Config{}))
		next = root.Spawn(normalizer.Props(hub, wire.Limits{}))
	} else {
		hub = root.Spawn(coalescer.HubProps(index.PID(), coalescer.Config{}))
		gate = closed(root.Spawn(normalizer.Props(hub, wire.Limits{})))
		next = gate
	}

	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		BlockSize: 16, CapacityBlocks: 256, ReplayBuffer: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	hop, err := NewHop(eng.Endpoint(), HopOptions{HWM: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hop.Close() })
	stream := messages.StreamID{Worker: 3}
	props, err := listener.Props(listener.Config{Stream: stream, Endpoint: hop.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(),
		BlockSize: 16, Window: window, Silence: -1, ReplayTimeout: 2 * time.Second, Next: next})
	if err != nil {
		t.Fatal(err)
	}
	lis := root.Spawn(props)
	stats := func() *listener.Stats { return ask[*listener.Stats](t, system, lis, &listener.StatsRequest{}) }
	if err := until(context.Background(), 10*time.Second, 10*time.Millisecond, func() (bool, string) {
		_ = eng.Publish()
		s := stats()
		return s.Received > 0, fmt.Sprint(s)
	}); err != nil {
		t.Fatal("listener never heard the engine: ", err)
	}

	drv, err := simengine.NewRandomDriver(simengine.RandomConfig{Seed: 3, BlockSize: 16, Prefixes: 16, MaxPrefixBlocks: 32, MaxSuffixTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	const prompts = 4000
	for range prompts {
		pr, _ := drv.Next()
		if _, err := eng.ServeRequest(simengine.Request{Tokens: pr.Tokens}); err != nil {
			t.Fatal(err)
		}
	}
	// The listener fills its window, then stops reading (what the check
	// below proves: nothing more was received).
	var stuck *listener.Stats
	eventually.True(t, "the listener's window full", func() (bool, string) {
		stuck = stats()
		return stuck.InFlight >= window, fmt.Sprint(stuck)
	})
	t.Logf("stuck: engine published %d batches, hop received %d, listener received %d, delivered %d, in flight %d",
		eng.Stats().NextSeq, hop.Stats().Received, stuck.Received, stuck.Delivered, stuck.InFlight)
	// The listener stopped reading once its window was full: of thousands
	// of batches it holds at most a window from the subscription and one
	// from the replay (credits; actors/listener/README.md, "Flow control").
	// Live batches received may pass the window by the few heartbeats the
	// start replay also returned (a live copy of a replayed batch is read
	// but not delivered again): on a loaded machine the replay can run
	// after the first heartbeats were published.
	// A gate before the normalizers holds every batch delivered; one
	// before the index lets the coalescer acknowledge those it emits
	// nothing for (heartbeats).
	held := stuck.InFlight == int(stuck.Delivered) || at == "index"
	if stuck.InFlight < window || stuck.InFlight > 2*window || !held || stuck.Received > 2*window {
		t.Errorf("while stuck: received %d, delivered %d, %d in flight; want the window (%d) full and reading stopped",
			stuck.Received, stuck.Delivered, stuck.InFlight, window)
	}

	root.Send(gate, openGate{})
	var state coalescer.StreamState
	maxInFlight := 0
	var beat time.Time
	if err := until(context.Background(), 30*time.Second, 5*time.Millisecond, func() (bool, string) {
		// A heartbeat now and then reveals a gap at the end (the last
		// batches dropped while stuck); between beats the listener can
		// catch up with the engine.
		if time.Since(beat) > 100*time.Millisecond {
			_ = eng.Publish()
			beat = time.Now()
		}
		s := stats()
		maxInFlight = max(maxInFlight, s.InFlight)
		status := ask[*coalescer.Status](t, system, hub, &coalescer.StatusRequest{})
		state = status.Streams[stream].State
		next := eng.Stats().NextSeq
		return s.NextSeq == next && !s.Replaying && s.InFlight == 0 && status.Streams[stream].LastSeq+1 == next,
			fmt.Sprintf("listener next %d of %d, replaying %v, in flight %d", s.NextSeq, next, s.Replaying, s.InFlight)
	}); err != nil {
		t.Fatal("never recovered: ", err)
	}
	recovered := stats()
	t.Logf("recovered: replays %v, resyncs %v, at most %d in flight while recovering", recovered.Replays, recovered.Resyncs, maxInFlight)
	if maxInFlight > 2*window {
		t.Errorf("%d batches in flight while recovering, over two windows (%d)", maxInFlight, 2*window)
	}
	if recovered.Replays["ok"] < 2 { // the start replay and at least one for the batches dropped while stuck
		t.Errorf("replays %v: nothing was dropped while stuck, the test proves little", recovered.Replays)
	}
	snap, err := index.Snapshot(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	truth := eng.Contents().Held()
	r := CheckStream(Truth{Stream: stream, Held: truth, HistoryHeld: true}, snap.Blocks[messages.WorkerKey{Worker: stream.Worker}], state)
	if !r.OK() || r.State != coalescer.StateExact || r.Held < 100 {
		t.Errorf("after recovery: %s", r)
	}
}
