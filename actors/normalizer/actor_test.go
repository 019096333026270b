package normalizer

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// TestLostEventsDropTheStream checks that a batch the index cannot fully
// apply — an unreadable payload, a truncated batch, an event rejected for a
// reason that loses history — reaches the coalescer with a resync that
// drops the stream's state and leaves it degraded, while a clean batch and
// events rejected by design pass without one.
func TestLostEventsDropTheStream(t *testing.T) {
	system := actor.NewActorSystem()
	got := make(chan *messages.NormalizedBatch, 8)
	next := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if b, ok := ctx.Message().(*messages.NormalizedBatch); ok {
			got <- b
		}
	}))
	pool := system.Root.Spawn(PoolProps(1, next, wire.DefaultLimits()))
	stored := func(b *wirefix.B) *wirefix.B {
		return b.Array(5).Str("BlockStored").Array(1).Uint(7, 0).Nil().Tokens(1, 2, 3, 4).Uint(4, 0)
	}
	clean := stored(wirefix.New().Batch(1, 1)).Nil().Bytes()
	unknownTag := wirefix.New().Batch(1, 1).Array(1).Str("LoadStat").Nil().Bytes()
	truncated := clean[:len(clean)-3]
	badHash := wirefix.New().Batch(1, 1).Array(4).Str("BlockRemoved").Array(1).Str("x").Nil().Nil().Nil().Bytes()
	cases := []struct {
		name    string
		payload []byte
		resync  messages.Resync
		want    messages.Resync
	}{
		{"clean", clean, messages.Resync{}, messages.Resync{}},
		{"rejected by design", unknownTag, messages.Resync{}, messages.Resync{}},
		{"not msgpack", []byte("garbage"), messages.Resync{}, messages.Resync{Reason: "events_lost"}},
		{"truncated", truncated, messages.Resync{}, messages.Resync{Reason: "events_lost"}},
		{"malformed remove", badHash, messages.Resync{}, messages.Resync{Reason: "events_lost"}},
		{"an exact start loses its exactness", badHash, messages.Resync{Reason: "start", Exact: true}, messages.Resync{Reason: "start"}},
		{"a resume is not kept", badHash, messages.Resync{Reason: "resumed", Exact: true, Keep: true}, messages.Resync{Reason: "events_lost"}},
	}
	for i, tc := range cases {
		system.Root.Send(pool, &messages.EngineBatch{Stream: messages.StreamID{Worker: 1}, Engine: "vllm",
			Seq: uint64(i), Payload: tc.payload, Resync: tc.resync})
		select {
		case b := <-got:
			if b.Resync != tc.want {
				t.Errorf("%s: resync %+v, want %+v", tc.name, b.Resync, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no batch", tc.name)
		}
	}
}
