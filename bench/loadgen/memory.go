package loadgen

import (
	"fmt"
	"runtime"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// measureMemory reads the index entries from /workers, then closes the
// router and reports the heap that closing released (after GC, before and
// after): everything the router held, engines excluded (they stay up).
// Run subtracts the same figure for an empty router of as many workers
// (fixed costs: actor system, listeners, sockets) before dividing by the
// entries.
func (c *cluster) measureMemory() (MemoryResult, error) {
	_, entries, err := c.streams()
	if err != nil {
		return MemoryResult{}, err
	}
	if err := c.warmRegistry(); err != nil {
		return MemoryResult{}, err
	}
	before := heapAfterGC()
	c.closeRouter()
	after := heapAfterGC()
	return MemoryResult{Workers: len(c.engines), Entries: entries, HeapBytes: int64(before) - int64(after)}, nil
}

// emptyRouterHeap is measureMemory's heap for a router with workers
// registered engines that served nothing.
func emptyRouterHeap(cfg clusterConfig) (int64, error) {
	c, err := startCluster(cfg)
	if err != nil {
		return 0, err
	}
	defer c.close()
	m, err := c.measureMemory()
	return m.HeapBytes, err
}

// registryWarmup is how many futures warmRegistry completes: enough to
// touch ~99.8 % of the registry's 32,768 tables.
const registryWarmup = 200_000

// warmRegistry completes futures until (nearly) every table of the actor
// system's process registry holds an allocation: protoactor-go shards it
// into 1,024 × 32 maps that keep what a future once put in them (~9 MiB
// once all are touched). How many a run touches depends on how many
// requests it served, not on its index; warmed in the measured router and
// in the empty one alike, the registry drops out of the difference.
func (c *cluster) warmRegistry() error {
	for _, h := range c.hosts {
		root := h.system.Root
		pid := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(struct{}); ok {
				ctx.Respond(struct{}{})
			}
		}))
		for range registryWarmup {
			// The actor always answers; the timeout only bounds a stuck
			// system, so it is generous (a second failed one of 200,000
			// waits under -race on a busy machine).
			if _, err := root.RequestFuture(pid, struct{}{}, time.Minute).Result(); err != nil {
				root.Stop(pid)
				return fmt.Errorf("loadgen: registry warm-up: %w", err)
			}
		}
		root.Stop(pid)
	}
	return nil
}

// PerEntry is the heap per index entry once the fixed heap is taken off
// (0 without entries).
func PerEntry(heap, fixed int64, entries int) float64 {
	if entries <= 0 {
		return 0
	}
	return float64(heap-fixed) / float64(entries)
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC() // the second cycle frees what the first one's finalizers released
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
