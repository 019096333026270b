package indexer

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// BenchmarkQuery measures a 64-block query through Index.Query (fan-out to
// every shard, merge) against a direct radix.Tree call, on 256 workers each
// holding 64 chains of 64 blocks that share their first 16 blocks with
// every other worker (~1 M entries).
func BenchmarkQuery(b *testing.B) {
	const workers, chains, depth, shared = 256, 64, 64, 16
	rng := rand.New(rand.NewPCG(1, 2))
	local := func(chain, i int) messages.LocalHash {
		if i < shared {
			return messages.LocalHash(1000 + i)
		}
		return messages.LocalHash(uint64(chain)<<20 | uint64(i))
	}
	events := make([]messages.RouterEvent, 0, workers*chains)
	for w := range workers {
		for c := range chains {
			chain := rng.IntN(chains * 4)
			ev := messages.RouterEvent{WorkerID: messages.WorkerID(w), Event: messages.KvCacheEvent{Kind: messages.KindStored}}
			for i := range depth {
				ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{
					BlockHash: messages.ExternalHash(uint64(w)<<40 | uint64(c)<<20 | uint64(i)), TokensHash: local(chain, i)})
			}
			events = append(events, ev)
		}
	}
	query := make([]messages.LocalHash, depth)
	for i := range query {
		query[i] = local(7, i)
	}
	opt := radix.MatchOptions{Tiers: true}
	b.Run("direct", func(b *testing.B) {
		tree := radix.New(radix.Config{})
		for _, ev := range events {
			tree.Apply(ev)
		}
		var o radix.Overlap
		for b.Loop() {
			tree.FindMatches(query, opt, &o)
		}
	})
	for _, shards := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			system := actor.NewActorSystem()
			x := Spawn(system.Root, Config{Shards: shards})
			defer x.Stop()
			for _, ev := range events {
				system.Root.Send(x.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
			}
			if _, err := x.Stats(time.Minute); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := x.Query(&QueryRequest{Hashes: query, Options: opt}, time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
