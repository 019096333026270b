//go:build !race

// Several members in one process: see members_test.go for why not -race.

package clusterindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// workload is what the cluster measurements index and ask: 256 workers,
// each 16 chains of 64 blocks sharing their first 16 with every other
// worker (~200 k entries), and a 64-block query matching one chain shape.
type workload struct {
	events []messages.RouterEvent
	query  []messages.LocalHash
}

func newWorkload() *workload {
	const workers, chains, depth, shared = 256, 16, 64, 16
	rng := rand.New(rand.NewPCG(1, 2))
	local := func(chain, i int) messages.LocalHash {
		if i < shared {
			return messages.LocalHash(1000 + i)
		}
		return messages.LocalHash(uint64(chain)<<20 | uint64(i))
	}
	w := &workload{query: make([]messages.LocalHash, depth)}
	for wk := range workers {
		for c := range chains {
			chain := rng.IntN(chains * 4)
			ev := messages.RouterEvent{WorkerID: messages.WorkerID(wk), Event: messages.KvCacheEvent{EventID: uint64(c + 1), Kind: messages.KindStored}}
			for i := range depth {
				ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{
					BlockHash: messages.ExternalHash(uint64(wk)<<40 | uint64(c)<<20 | uint64(i)), TokensHash: local(chain, i)})
			}
			w.events = append(w.events, ev)
		}
	}
	for i := range w.query {
		w.query[i] = local(7, i)
	}
	return w
}

// BenchmarkClusterQuery measures a 64-block query through the cluster
// index of member 0 with 1, 2 and 3 members in one process (gRPC on
// loopback between them; shards spread by placement) against the local
// indexer.Index with as many shards, from one caller (the latency
// overhead) and from 256 concurrent callers (load: on a small machine
// queueing dominates). Reported: p50 and p99 latency of one query, answers missing a
// shard (partial/op: none expected with the 1 s deadline), and for the
// cluster the index entries of the member holding most
// (max-member-entries) and the sum over members divided by the local
// index's entries (replication: 1 = spread, not copied).
func BenchmarkClusterQuery(b *testing.B) {
	const shards = 8
	callers := []int{1, 256}
	w := newWorkload()
	q := &indexer.QueryRequest{Hashes: w.query, Options: radix.MatchOptions{Tiers: true}}
	system := actor.NewActorSystem()
	local := indexer.Spawn(system.Root, indexer.Config{Shards: shards})
	defer local.Stop()
	for _, ev := range w.events {
		system.Root.Send(local.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
	}
	st, err := local.Stats(time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	localEntries := int64(st.Size.Entries)
	for _, c := range callers {
		b.Run(fmt.Sprintf("local/callers=%d", c), func(b *testing.B) {
			measure(b, c, func() bool {
				_, err := local.Query(q, time.Second)
				return err == nil
			})
		})
	}
	for n := 1; n <= 3; n++ {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			joiners := make([]joiner, n)
			for i := range joiners {
				joiners[i] = NewNode(Config{}).Join
			}
			ms := startMembers(b, fmt.Sprintf("bench-%d", n), joiners...)
			x := Spawn(ms[0], namespace, Config{Shards: shards, QueryDeadline: time.Second})
			defer x.Stop()
			if err := x.Create(wait); err != nil {
				b.Fatal(err)
			}
			for _, ev := range w.events {
				ms[0].Cluster.ActorSystem.Root.Send(x.PID(), &messages.RouterEventBatch{Events: []messages.RouterEvent{ev}})
			}
			if _, err := x.Stats(time.Minute); err != nil {
				b.Fatal(err)
			}
			perMember := map[string]int64{}
			for s := range shards {
				res, err := ms[0].Cluster.Request(Identity(namespace, s), Kind, &clusterpb.StatsRequest{})
				if err != nil {
					b.Fatal(err)
				}
				st, err := clusterpb.ToStats(res.(*clusterpb.Stats))
				if err != nil {
					b.Fatal(err)
				}
				perMember[x.Owner(s)] += int64(st.Size.Entries)
			}
			var total, most int64
			for _, e := range perMember {
				total += e
				most = max(most, e)
			}
			for _, c := range callers {
				b.Run(fmt.Sprintf("callers=%d", c), func(b *testing.B) {
					measure(b, c, func() bool {
						return !x.Query(q, 0).Partial()
					})
					b.ReportMetric(float64(most), "max-member-entries")
					b.ReportMetric(float64(total)/float64(localEntries), "replication")
				})
			}
		})
	}
}

// measure runs query from callers goroutines, b.N times in all, and
// reports the p50/p99 latency and the share of failed (partial) answers.
func measure(b *testing.B, callers int, query func() bool) {
	lat := make([][]time.Duration, callers)
	failed := make([]int, callers)
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range callers {
		n := b.N / callers
		if c < b.N%callers {
			n++
		}
		wg.Go(func() {
			for range n {
				start := time.Now()
				if !query() {
					failed[c]++
				}
				lat[c] = append(lat[c], time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	fails := 0
	for _, f := range failed {
		fails += f
	}
	b.ReportMetric(float64(fails)/float64(len(all)), "partial/op")
}
