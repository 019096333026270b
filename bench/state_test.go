package bench

import (
	"runtime"
	"testing"
)

// TestStateBytesPerEntry measures, in process, the heap each ingest stage
// holds per (block, worker) entry of the index once the first requests of
// the Mooncake conversation trace are applied (sessions tagged): the
// session index, the coalescers and the index tree. Each figure is the heap
// released by dropping that stage (after GC), over the tree's entries. kvrouter-bench's memory measure
// counts the whole router; this one says which stage holds what.
func TestStateBytesPerEntry(t *testing.T) {
	const requests, blockSize = 2000, 16
	for _, workers := range []int{16, 64} {
		loads := prepareLoads(t, workers, requests, blockSize, true)
		batches, _ := interleave(loads)
		p := newWirePath(workers, blockSize, true)
		for _, bt := range batches {
			p.apply(t, bt)
		}
		entries := p.tree.Size().Entries
		all := heapAfterGC()
		p.sessions = nil
		noSessions := heapAfterGC()
		p.cos = nil
		noCoalescers := heapAfterGC()
		p.tree = nil
		noTree := heapAfterGC()
		runtime.KeepAlive(p)
		per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(entries) }
		s, c, x := per(all, noSessions), per(noSessions, noCoalescers), per(noCoalescers, noTree)
		t.Logf("%4d workers, %d entries: B/entry %.1f = sessions %.1f + coalescers %.1f + tree %.1f", workers, entries, s+c+x, s, c, x)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
