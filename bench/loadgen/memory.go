package loadgen

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/reply"
)

// measureMemory reads the index entries from /workers, then closes the
// router and reports the heap that closing released (after GC, before and
// after): everything the router held, engines excluded (they stay up).
// Run subtracts the same figure for an empty router of as many workers
// (fixed costs: actor system, listeners, sockets) before dividing by the
// entries. With clusterConfig.MemProfile set it writes a heap profile at
// both moments (memProfilePath; role names the router: measured or empty).
func (c *cluster) measureMemory(role string) (MemoryResult, error) {
	_, entries, err := c.streams()
	if err != nil {
		return MemoryResult{}, err
	}
	if err := c.warmRegistry(); err != nil {
		return MemoryResult{}, err
	}
	before := heapAfterGC()
	if err := c.writeHeapProfile(role, "before"); err != nil {
		return MemoryResult{}, err
	}
	c.closeRouter()
	after := heapAfterGC()
	if err := c.writeHeapProfile(role, "after"); err != nil {
		return MemoryResult{}, err
	}
	return MemoryResult{Workers: len(c.engines), Entries: entries, HeapBytes: int64(before) - int64(after)}, nil
}

// memProfilePath names a heap profile of a memory measure: prefix, the
// worker count, the router's role (measured, empty) and the moment
// (before or after closing it), e.g. "on-16w-measured-before.pb.gz".
// What closing the measured router released, by allocation site:
// go tool pprof -sample_index=inuse_space -nodefraction=0 -top
// -diff_base on-16w-measured-after.pb.gz on-16w-measured-before.pb.gz.
func memProfilePath(prefix string, workers int, role, moment string) string {
	return fmt.Sprintf("%s-%dw-%s-%s.pb.gz", prefix, workers, role, moment)
}

// writeHeapProfile writes the heap profile of this moment when the run
// asks for it. The profile is as of the last GC, which heapAfterGC has
// just run: it holds what HeapAlloc counts, by allocation site.
func (c *cluster) writeHeapProfile(role, moment string) error {
	if c.cfg.MemProfile == "" {
		return nil
	}
	f, err := os.Create(memProfilePath(c.cfg.MemProfile, len(c.engines), role, moment))
	if err != nil {
		return fmt.Errorf("loadgen: heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("loadgen: heap profile: %w", err)
	}
	return f.Close()
}

// emptyRouterHeap is measureMemory's heap for a router with workers
// registered engines that served nothing.
func emptyRouterHeap(cfg clusterConfig) (int64, error) {
	c, err := startCluster(cfg)
	if err != nil {
		return 0, err
	}
	defer c.close()
	m, err := c.measureMemory("empty")
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
			if _, err := reply.FutureResult(root.RequestFuture(pid, struct{}{}, time.Minute)); err != nil {
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
