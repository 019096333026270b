package coalescer_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/messages"
)

// benchInputs builds a balanced ring of one stream's events: requests of
// chunks Stored events of 32 blocks each, continuing one chain (a prefill
// reported in 32-block chunks), and, lagging four requests behind, the
// eviction of an earlier request's blocks as Removed events of 32 hashes.
// Over a full ring every hash is stored and removed once, so the
// reference-count table stays at its steady size. interleave > 1 spreads
// consecutive chunks over that many concurrent requests (sessions), which
// defeats merging.
func benchInputs(requests, chunks, interleave int) ([]messages.PlacementEvent, int) {
	const blocks = 32
	hash := func(req, chunk, i int) messages.ExternalHash {
		return messages.ExternalHash(uint64(req)<<32 | uint64(chunk*blocks+i+1))
	}
	var evs []messages.PlacementEvent
	total := 0
	for base := 0; base < requests; base += interleave {
		for c := range chunks {
			for r := base; r < base+interleave && r < requests; r++ {
				ev := messages.PlacementEvent{
					Placement: messages.Placement{Worker: key},
					Event:     messages.KvCacheEvent{DpRank: key.DpRank, Kind: messages.KindStored},
					SessionID: fmt.Sprintf("session-%d", r%64),
				}
				if c > 0 {
					ev.Event.HasParent, ev.Event.ParentHash = true, hash(r, c-1, blocks-1)
				}
				for i := range blocks {
					h := hash(r, c, i)
					ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: h, TokensHash: messages.LocalHash(h * 31)})
				}
				evs = append(evs, ev)
				total += blocks
			}
		}
		for r := base; r < base+interleave && r < requests; r++ {
			old := (r - 4 + requests) % requests
			for c := range chunks {
				ev := messages.PlacementEvent{
					Placement: messages.Placement{Worker: key},
					Event:     messages.KvCacheEvent{DpRank: key.DpRank, Kind: messages.KindRemoved},
				}
				for i := range blocks {
					ev.Event.Removed = append(ev.Event.Removed, hash(old, c, i))
				}
				evs = append(evs, ev)
				total += blocks
			}
		}
	}
	return evs, total
}

// BenchmarkPush measures Push on realistic streams (one op = one input
// event): "chains32" is one request at a time (4 chunks of 32 blocks merge
// into one 128-block event, evictions likewise); "interleaved4" has four
// sessions' chunks alternating, so stores do not merge (evictions still do).
// The "-batch6" runs also Flush after every sixth input, as the actor does
// at the end of each engine batch.
func BenchmarkPush(b *testing.B) {
	for _, c := range []struct {
		name       string
		interleave int
		batch      int // inputs between Flushes; 0: no Flush
	}{{"chains32", 1, 0}, {"interleaved4", 4, 0}, {"chains32-batch6", 1, 6}, {"interleaved4-batch6", 4, 6}} {
		b.Run(c.name, func(b *testing.B) {
			evs, blocks := benchInputs(256, 4, c.interleave)
			s := coalescer.New(key, coalescer.Config{})
			out := make([]messages.RouterEvent, 0, 16)
			b.ReportAllocs()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for i := 0; b.Loop(); i++ {
				out = s.Push(evs[i%len(evs)], out[:0])
				if c.batch > 0 && i%c.batch == c.batch-1 {
					out = s.Flush(out)
				}
			}
			runtime.ReadMemStats(&m1)
			secs := b.Elapsed().Seconds()
			st := s.Stats()
			emitted := st.Emitted[1] + st.Emitted[2] + st.Emitted[3]
			b.ReportMetric(float64(st.Pushed)/secs, "events/s")
			b.ReportMetric(float64(st.Pushed)*float64(blocks)/float64(len(evs))/secs, "blocks/s")
			b.ReportMetric(float64(st.Pushed)/float64(max(emitted, 1)), "in/out")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(max(emitted, 1)), "allocs/emitted")
		})
	}
}
