package indexer

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/messages"
)

// A shard that crashes restarts empty: it asks the listeners of the
// streams placed on it — and only those — to rebuild them.
func TestCrashedShardHasItsStreamsRebuilt(t *testing.T) {
	system := actor.NewActorSystem()
	asked := make(chan messages.StreamID, 8)
	fake := func(s messages.StreamID) *actor.PID {
		return system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(*listener.Rebuild); ok {
				asked <- s
			}
		}))
	}
	// Two workers on shard 0, one on shard 1 (of 2).
	var on0, on1 []messages.WorkerID
	for w := messages.WorkerID(1); len(on0) < 2 || len(on1) < 1; w++ {
		if ShardOf(w, 2) == 0 {
			on0 = append(on0, w)
		} else {
			on1 = append(on1, w)
		}
	}
	streams := map[messages.StreamID]*actor.PID{}
	for _, w := range append(on0[:2], on1[0]) {
		s := messages.StreamID{Worker: w}
		streams[s] = fake(s)
	}
	x := Spawn(system.Root, Config{Shards: 2, Listeners: func() map[messages.StreamID]*actor.PID { return streams }})
	defer x.Stop()

	var crash *messages.RouterEventBatch // a nil batch: the shard's handler panics
	system.Root.Send(x.shards[0], crash)
	got := map[messages.StreamID]bool{}
	for range 2 {
		select {
		case s := <-asked:
			got[s] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("rebuilds asked: %v, want the streams of workers %v", got, on0[:2])
		}
	}
	select {
	case s := <-asked:
		t.Fatalf("stream %v of shard 1 asked to rebuild too", s)
	case <-time.After(100 * time.Millisecond):
	}
	for _, w := range on0[:2] {
		if !got[messages.StreamID{Worker: w}] {
			t.Fatalf("rebuilds asked: %v, want workers %v", got, on0[:2])
		}
	}
	if _, err := x.Stats(time.Second); err != nil { // the shard is back
		t.Fatal(err)
	}
}
