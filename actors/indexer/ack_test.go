package indexer

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
)

// A batch's acknowledgement (RouterEventBatch.Ack) reaches its listener
// once the shard has applied the batch — a query asked after it sees the
// batch's blocks, though queries pass batches still queued in a shard's
// mailbox — and at once for a batch with nothing to apply.
func TestAckOnceApplied(t *testing.T) {
	system := actor.NewActorSystem()
	listener, acks := collector[*messages.Applied](system)
	x := Spawn(system.Root, Config{Shards: 3})
	defer x.Stop()
	next := func() *messages.Applied {
		t.Helper()
		select {
		case a := <-acks:
			return a
		case <-time.After(wait):
			t.Fatal("no acknowledgement")
			return nil
		}
	}
	stream := messages.StreamID{Worker: 4}
	ack := func(seq uint64) *messages.Ack {
		return &messages.Ack{To: listener, Applied: messages.Applied{Stream: stream, Seq: seq, Count: 1}}
	}
	for seq := uint64(1); seq <= 50; seq++ {
		system.Root.Send(x.PID(), &messages.RouterEventBatch{Ack: ack(seq), Events: []messages.RouterEvent{{WorkerID: 4,
			Event: messages.KvCacheEvent{EventID: seq, Kind: messages.KindStored,
				Blocks: []messages.StoredBlock{{BlockHash: messages.ExternalHash(seq), TokensHash: messages.LocalHash(seq)}}}}}})
		a := next()
		if a.Seq != seq || a.Stream != stream || a.Count != 1 {
			t.Fatalf("acknowledgement %+v, want seq %d of %v", a, seq, stream)
		}
		res, err := x.Query(&QueryRequest{Hashes: []messages.LocalHash{messages.LocalHash(seq)}}, wait)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Scores) != 1 || res.Scores[0].Key.Worker != 4 || res.Scores[0].Blocks != 1 {
			t.Fatalf("batch %d acknowledged, then a query scored %+v: want worker 4's block", seq, res.Scores)
		}
	}
	system.Root.Send(x.PID(), &messages.RouterEventBatch{Ack: ack(51)})
	if a := next(); a.Seq != 51 {
		t.Fatalf("empty batch: acknowledgement %+v, want seq 51", a)
	}
}
