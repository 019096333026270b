package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// shRow is one design × shard count on one workload.
type shRow struct {
	design string
	n      int

	blkMax, entMax float64 // max/mean over shards of tree blocks, of (block, worker) entries
	dup            float64 // Σ shard entries / unsharded entries
	qMax           float64 // max/mean over shards of queries received
	workMax        float64 // max/mean over shards of FindMatches time
	shardsPerQ     float64
	nsPerQ         float64 // one core: Σ shard FindMatches + route + merge, per query
	shardNsPerQ    float64 // of which FindMatches
	coordNsPerQ    float64 // of which route + merge (coordinator)
	parQPS         float64 // Q / max(busiest shard, coordinator): one core each
	applyNs        float64 // one core: applying the events per stored block (removes and routing table included)
	bytesPerEntry  float64 // heap of shards + routing table per unsharded entry
	tableBytes     float64 // routing table alone, per unsharded entry
	promotions     int
	migrated       int
	mismatches     int
	bestDiffs      int
}

// shMeasure replays rec through one design and measures it.
func shMeasure(rec *shRecording, name string, n, minSplit int) shRow {
	row := shRow{design: name, n: n}
	before := shHeap()
	d := shNew(name, n, minSplit)
	res := shReplay(rec, d)
	row.mismatches, row.bestDiffs = res.mismatches, res.bestDiffs
	row.applyNs = float64(res.apply) / float64(rec.cache.StoredBlocks)
	total := shHeap() - before

	row.blkMax = shMaxMean(d, func(sz radix.Size) int { return sz.Blocks })
	row.entMax = shMaxMean(d, func(sz radix.Size) int { return sz.Entries })
	var ent int
	for _, tr := range d.trees() {
		ent += tr.Size().Entries
	}
	row.dup = float64(ent) / float64(rec.size.Entries)
	row.qMax = shMaxMeanInts(res.queries)
	if b, ok := d.(*shBranch); ok {
		row.promotions, row.migrated = b.promotions, b.migrated
	}

	// Timing on the final index, single-threaded: every prompt of the
	// workload as a query; each shard's queries in one loop (its tree warm,
	// as on its own core); the best of 3 rounds.
	qs := make([][]messages.LocalHash, len(rec.steps))
	for i := range rec.steps {
		qs[i] = rec.steps[i].q
	}
	per := make([][]int32, n)
	var multi []int32
	var dst []int
	touched := 0
	for i, q := range qs {
		dst = d.route(q, dst[:0])
		touched += len(dst)
		for _, s := range dst {
			per[s] = append(per[s], int32(i))
		}
		if len(dst) > 1 {
			multi = append(multi, int32(i))
		}
	}
	row.shardsPerQ = float64(touched) / float64(len(qs))
	const rounds = 3
	work := make([]time.Duration, n)
	var ov radix.Overlap
	for s := range n {
		tr := d.trees()[s]
		work[s] = shBestOf(rounds, func() {
			for _, i := range per[s] {
				tr.FindMatches(qs[i], shOpt, &ov)
			}
		})
	}
	route := shBestOf(rounds, func() {
		for _, q := range qs {
			dst = d.route(q, dst[:0])
		}
	})
	// Merging fan-out answers, on a sample of up to 512 queries.
	var merge time.Duration
	if len(multi) > 0 {
		step := max(1, len(multi)/512)
		var sample []shAnswer
		for k := 0; k < len(multi); k += step {
			var a shAnswer
			q := qs[multi[k]]
			a.shards = d.route(q, nil)
			a.ovs = make([]radix.Overlap, len(a.shards))
			for j, s := range a.shards {
				d.trees()[s].FindMatches(q, shOpt, &a.ovs[j])
			}
			sample = append(sample, a)
		}
		const reps = 20
		m := shBestOf(rounds, func() {
			for range reps {
				for k := range sample {
					shMerge(&sample[k], len(sample[k].shards))
				}
			}
		})
		merge = m * time.Duration(len(multi)) / time.Duration(reps*len(sample))
	}
	var sum, busiest time.Duration
	for _, w := range work {
		sum += w
		busiest = max(busiest, w)
	}
	row.workMax = float64(busiest) * float64(n) / float64(sum)
	nq := float64(len(qs))
	row.shardNsPerQ = float64(sum) / nq
	row.coordNsPerQ = float64(route+merge) / nq
	row.nsPerQ = row.shardNsPerQ + row.coordNsPerQ
	row.parQPS = nq / max(busiest, route+merge).Seconds()

	withTable := shHeap() - before
	d.dropTable()
	trees := shHeap() - before
	runtime.KeepAlive(d)
	row.bytesPerEntry = float64(total) / float64(rec.size.Entries)
	row.tableBytes = float64(int64(withTable)-int64(trees)) / float64(rec.size.Entries)
	return row
}

func shBestOf(rounds int, f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range rounds {
		t0 := time.Now()
		f()
		best = min(best, time.Since(t0))
	}
	return best
}

func shHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func shMaxMeanInts(v []int) float64 {
	mx, sum := 0, 0
	for _, x := range v {
		mx = max(mx, x)
		sum += x
	}
	if sum == 0 {
		return 0
	}
	return float64(mx) * float64(len(v)) / float64(sum)
}

// TestShardingMeasure is the sharding-key measurement behind
// actors/indexer/README.md ("Sharding"; figures in bench/README.md). It replays the whole Mooncake conversation trace
// (12,031 requests, 16 tokens per hash_id), plain and with an 8-block
// shared system prompt (hot branch), over 64 and 1,000 simulated workers
// with LRU caches, through every design with 1, 2, 4 and 8 shards, fails
// on any answer that differs from the unsharded tree's, and logs the
// table. Opt-in (about a minute and a half on 2 cores):
//
//	KVROUTER_SHARDING=1 go test ./bench/ -run TestShardingMeasure -v -timeout 15m
//
// -short skips the 1,000-worker runs.
func TestShardingMeasure(t *testing.T) {
	if os.Getenv("KVROUTER_SHARDING") == "" {
		t.Skip("opt-in measurement: KVROUTER_SHARDING=1 go test ./bench/ -run TestShardingMeasure -v")
	}
	type workload struct {
		src               shSource
		workers, capacity int
	}
	var wls []workload
	for _, src := range []shSource{
		{name: "mooncake", shared: 1},
		{name: "mooncake+sys8", sys: 8, shared: 9},
	} {
		wls = append(wls, workload{src, 64, 2048})
		if !testing.Short() {
			wls = append(wls, workload{src, 1000, 256})
		}
	}
	const minSplit = 4096
	var out strings.Builder
	fmt.Fprintf(&out, "machine: %d CPUs, %s %s/%s\n", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, wl := range wls {
		t0 := time.Now()
		rec := shRecord(t, wl.src, wl.workers, wl.capacity)
		c := rec.cache
		fmt.Fprintf(&out, "\n%s, W=%d, capacity %d blocks/worker: %d requests, %d prompt blocks, hit %.1f%%, %d stored, %d evicted; "+
			"unsharded index at the end: %d blocks, %d entries\n",
			wl.src.name, wl.workers, wl.capacity, len(rec.steps), c.PromptBlocks, 100*float64(c.HitBlocks)/float64(c.PromptBlocks),
			c.StoredBlocks, c.EvictedBlocks, rec.size.Blocks, rec.size.Entries)
		fmt.Fprintf(&out, "%-13s %2s %5s %5s %5s %5s %5s %4s %6s %6s %6s %8s %6s %6s %6s %5s %6s %s\n",
			"design", "N", "blk", "ent", "dup", "q", "work", "sh/q", "ns/q", "shard", "coord", "par-q/s", "apply", "B/ent", "tblB", "promo", "migr", "mismatch(best)")
		rows := []shRow{shMeasure(rec, "worker", 1, minSplit)}
		rows[0].design = "unsharded"
		for _, name := range append(slices.Clone(shDesignNames), "branch-ref") {
			for _, n := range []int{2, 4, 8} {
				rows = append(rows, shMeasure(rec, name, n, minSplit))
			}
		}
		for _, r := range rows {
			fmt.Fprintf(&out, "%-13s %2d %5.2f %5.2f %5.2f %5.2f %5.2f %4.0f %6.0f %6.0f %6.0f %8.0f %6.0f %6.1f %6.1f %5d %6d %d(%d)\n",
				r.design, r.n, r.blkMax, r.entMax, r.dup, r.qMax, r.workMax, r.shardsPerQ, r.nsPerQ, r.shardNsPerQ, r.coordNsPerQ,
				r.parQPS, r.applyNs, r.bytesPerEntry, r.tableBytes, r.promotions, r.migrated, r.mismatches, r.bestDiffs)
			if r.mismatches != 0 && r.design != "branch-ref" {
				t.Errorf("%s %s N=%d: %d answers differ from the unsharded tree", wl.src.name, r.design, r.n, r.mismatches)
			}
		}
		fmt.Fprintf(&out, "(%.1fs)\n", time.Since(t0).Seconds())
	}
	t.Logf("sharding measurement — columns: blk/ent = max/mean over shards of tree blocks / (block, worker) entries; "+
		"dup = Σ shard entries / unsharded entries; q, work = max/mean over shards of queries received / FindMatches time; "+
		"sh/q = shards per query; ns/q = one-core work per query = shard (Σ FindMatches) + coord (route + merge); "+
		"par-q/s = queries / max(busiest shard, coordinator), each on its own core, no messaging cost; "+
		"apply = ns per stored block to apply all events (removes, routing table, broadcasts included), one core; "+
		"B/ent = heap of shards + routing table per unsharded entry; tblB = routing table alone; "+
		"promo/migr = hot-branch promotions / blocks re-applied; mismatch(best) = answers differing from the unsharded tree "+
		"(of which in the deepest overlap)\n%s", out.String())
}
