package listener_test

import (
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/messages"
)

// TestRebuildRefeedsTheStream: Rebuild clears the stream and re-sends
// everything the replay buffer holds, and the answer comes after the last
// re-fed batch reached the index; exact only when the buffer holds the
// publisher's history from its first batch.
func TestRebuildRefeedsTheStream(t *testing.T) {
	for _, c := range []struct {
		name      string
		seqStart  uint64
		wantExact bool
	}{{"history from seq 0", 0, true}, {"history from seq 5 (an earlier part unknown)", 5, false}} {
		t.Run(c.name, func(t *testing.T) {
			in := startIngest(t, c.seqStart)
			in.settle(t)
			first := in.serve(t)
			in.settle(t)
			for len(in.index) > 0 {
				<-in.index
			}
			res, err := in.system.Root.RequestFuture(in.listener, &listener.Rebuild{Tag: 42}, 10*time.Second).Result()
			if err != nil {
				t.Fatal(err)
			}
			got := res.(*listener.Rebuilt)
			if got.Tag != 42 || got.Stream != (messages.StreamID{Worker: 7}) || got.Exact != c.wantExact {
				t.Fatalf("rebuilt %+v, want tag 42, worker 7, exact %v", got, c.wantExact)
			}
			// Everything re-fed is already in the index's mailbox: a marker
			// sent now comes after it. The clear first, then the stored
			// blocks again.
			marker := &messages.RouterEventBatch{Position: messages.Position{Seq: 1 << 40}}
			in.system.Root.Send(in.indexPID, marker)
			var cleared bool
			stored := map[messages.ExternalHash]bool{}
			for m := <-in.index; m != marker; m = <-in.index {
				for _, ev := range m.Events {
					switch ev.Event.Kind {
					case messages.KindCleared:
						cleared = len(stored) == 0
					case messages.KindStored:
						for _, b := range ev.Event.Blocks {
							stored[b.BlockHash] = true
						}
					}
				}
			}
			if !cleared {
				t.Fatal("the rebuild did not clear the stream before re-feeding it")
			}
			for _, ev := range first.Events {
				for _, b := range ev.Event.Blocks {
					if !stored[b.BlockHash] {
						t.Fatalf("block %x of the first batch not re-fed before the answer", b.BlockHash)
					}
				}
			}
			if s := in.stats(t); s.Rebuilds != 1 {
				t.Fatalf("rebuilds %d, want 1", s.Rebuilds)
			}
		})
	}
}
