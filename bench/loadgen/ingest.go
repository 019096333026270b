package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// ingestServers is how many goroutines serve requests on the engines in
// the ingest phase: goroutine g serves the engines w ≡ g (mod
// ingestServers), each engine's requests in trace order.
const ingestServers = 4

// ingest serves reqs on the engines as fast as the engines go — request i
// on engine i mod workers — and measures stored blocks and events applied
// per second, from the first serve until every engine's last published
// batch is visible in the index, with the lag sampled meanwhile.
func (c *cluster) ingest(reqs []Request) (IngestResult, error) {
	n := len(c.engines)
	res := IngestResult{Workers: n, Requests: len(reqs)}
	prober := c.startProber()
	last := make([]*probe, n)
	errs := make([]error, ingestServers)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range ingestServers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range reqs {
				w := i % n
				if w%ingestServers != g {
					continue // engine w is another goroutine's
				}
				_, p, err := c.serve(w, reqs[i], "")
				if err != nil {
					errs[g] = err
					return
				}
				if p != nil {
					prober.offer(p)
					last[w] = p
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			prober.stop()
			return res, err
		}
	}
	end := start
	for _, p := range last {
		if p == nil {
			continue
		}
		at, err := c.visible(context.Background(), p, 60*time.Second)
		if err != nil {
			prober.stop()
			return res, fmt.Errorf("loadgen: ingest: engine %d's last batch never reached the index", p.worker+1)
		}
		if at.After(end) {
			end = at
		}
	}
	lags, timeouts := prober.stop()
	elapsed := end.Sub(start).Seconds()
	for _, e := range c.engines {
		s := e.Stats()
		res.StoredBlocks += int(s.Cache.StoredBlocks)
		res.RemovedBlocks += int(s.Cache.EvictedBlocks)
		// every published batch but a heartbeat holds one BlockStored; each
		// eviction is one BlockRemoved
		res.Events += int(s.Published-s.Heartbeats) + int(s.Cache.EvictedBlocks)
	}
	res.Seconds = elapsed
	res.BlocksPerSec = float64(res.StoredBlocks) / elapsed
	res.EventsPerSec = float64(res.Events) / elapsed
	res.Lag, res.LagTimeouts = Summarize(lags), timeouts
	res.Valid, res.Invalid = c.validity(lags, timeouts)
	return res, nil
}

// lagFloor is the lag below which a growing lag is still not "behind".
const lagFloor = 50 * time.Millisecond

// validity says whether a phase kept up: every stream still exact (no
// resync, no degraded stream), no probe lost, and the lag not growing.
func (c *cluster) validity(lags []time.Duration, timeouts int) (bool, string) {
	st, err := c.streamStates()
	switch {
	case err != nil:
		return false, fmt.Sprintf("/workers failed: %v", err)
	case st.notExact > 0:
		return false, st.String()
	case timeouts > 0:
		return false, fmt.Sprintf("%d published batches not visible within %v", timeouts, probeTimeout)
	case LagGrowing(lags, lagFloor):
		return false, "lag growing"
	}
	return true, ""
}
