package radix

import (
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/kvrouter/kvrouter/messages"
)

// TestBytesPerEntry builds a 100k-block index over 1,000 workers and checks
// the heap per (block, stream) entry against the 100 B target.
func TestBytesPerEntry(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("memory figure: not under -short or -race")
	}
	c := newCorpus(100_000, 1000, 1)
	tr, heap := c.build(c.events())
	sz := tr.Size()
	per := float64(heap) / float64(sz.Entries)
	t.Logf("%d blocks, %d entries, %d streams: %d B heap, %.1f B/entry, %.1f B/block",
		sz.Blocks, sz.Entries, sz.Streams, heap, per, float64(heap)/float64(sz.Blocks))
	if per > 100 {
		t.Errorf("%.1f B per entry, target ≤ 100", per)
	}
}

var big struct {
	once    sync.Once
	tree    *Tree
	queries [][]messages.LocalHash
	heap    uint64
}

// bigIndex is the 1 M-block, 1,000-worker index of the benchmarks.
func bigIndex() *Tree {
	big.once.Do(func() {
		c := newCorpus(1_000_000, 1000, 2)
		big.tree, big.heap = c.build(c.events())
		big.queries = c.queries(4096, 3)
	})
	return big.tree
}

func BenchmarkFindMatches(b *testing.B) {
	tr := bigIndex()
	for _, bc := range []struct {
		name string
		opt  MatchOptions
	}{
		{"plain", MatchOptions{}},
		{"freq+sizes", MatchOptions{Frequencies: true, TreeSizes: true}},
		{"all", MatchOptions{Frequencies: true, TreeSizes: true, Tiers: true}},
		{"early-exit", MatchOptions{EarlyExit: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ov, scores := &Overlap{}, 0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				tr.FindMatches(big.queries[i%len(big.queries)], bc.opt, ov)
				scores += len(ov.Scores)
			}
			b.ReportMetric(float64(scores)/float64(b.N), "scores/op")
		})
	}
}

// BenchmarkFindMatchesLatency times each query on its own and reports
// percentiles (the clock read adds a few tens of ns).
func BenchmarkFindMatchesLatency(b *testing.B) {
	tr := bigIndex()
	ov := &Overlap{}
	lat := make([]time.Duration, 0, 1<<20)
	for i := 0; b.Loop(); i++ {
		q := big.queries[i%len(big.queries)]
		t0 := time.Now()
		tr.FindMatches(q, MatchOptions{Frequencies: true, TreeSizes: true}, ov)
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(t0))
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(pct(0.999), "p99.9-ns")
}

// BenchmarkApply builds a 100k-block, 1,000-worker index from scratch, over
// and over.
func BenchmarkApply(b *testing.B) {
	c := newCorpus(100_000, 1000, 4)
	evs := c.events()
	b.ReportAllocs()
	var tr *Tree
	blocks, i := 0, len(evs)
	for b.Loop() {
		if i == len(evs) {
			b.StopTimer()
			tr, i = New(Config{}), 0
			b.StartTimer()
		}
		tr.Apply(evs[i])
		blocks += len(evs[i].Event.Blocks)
		i++
	}
	b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
}

// BenchmarkChurn removes a conversation's first tail block (cascading the
// rest of its chain) and stores it again, on the 100k-block index.
func BenchmarkChurn(b *testing.B) {
	c := newCorpus(100_000, 1000, 5)
	evs := c.events()
	tr := New(Config{})
	var stores []messages.RouterEvent
	for _, ev := range evs {
		tr.Apply(ev)
		if !ev.Event.HasParent {
			stores = append(stores, ev)
		}
	}
	b.ReportAllocs()
	blocks := 0
	for i := 0; b.Loop(); i++ {
		ev := stores[i%len(stores)]
		ev.Event.EventID = 0
		first := ev.Event.Blocks[promptBlocks].BlockHash
		tr.Apply(messages.RouterEvent{WorkerID: ev.WorkerID, Event: messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: []messages.ExternalHash{first}}})
		tr.Apply(ev)
		blocks += len(ev.Event.Blocks) - promptBlocks
	}
	b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
}

// BenchmarkIndexMemory reports the heap of the 1 M-block index.
func BenchmarkIndexMemory(b *testing.B) {
	tr := bigIndex()
	sz := tr.Size()
	for b.Loop() {
		_ = tr.Size()
	}
	b.ReportMetric(float64(big.heap)/float64(sz.Entries), "B/entry")
	b.ReportMetric(float64(big.heap)/float64(sz.Blocks), "B/block")
	b.ReportMetric(float64(sz.Entries), "entries")
	b.ReportMetric(float64(big.heap)/(1<<20), "MiB")
}

// TestNodeSize checks that a node takes 32 bytes: two in a cache line, the
// arena's share of every entry (its one-stream entry and its set index
// share a field).
func TestNodeSize(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n != 32 {
		t.Errorf("node is %d bytes, want 32", n)
	}
}
