package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/messages/api"
)

// routedRun is what a kvrouter replay measured.
type routedRun struct {
	tally    Tally
	route    []time.Duration
	lags     []time.Duration
	timeouts int
	// partial counts answers that lacked part of the index (a cluster's
	// shard grains that missed the route deadline or were rebuilding).
	partial int
}

// replayRouted replays reqs one at a time through the real route path:
// route (in process), serve on the chosen engine (which publishes its cache
// events), and wait until the published blocks are visible in the index
// before the next request — a conversation's next turn comes seconds later
// in the trace, far more than the lag. Each request's load is marked
// prefill-done once served and freed inFlight requests later. With
// sessions, the request's session id goes to the router and the engine.
func (c *cluster) replayRouted(reqs []Request, sessions bool, inFlight int) (routedRun, error) {
	ctx := context.Background()
	run := routedRun{tally: NewTally(len(c.engines))}
	for i, r := range reqs {
		id := "q" + strconv.Itoa(i)
		req := api.RouteRequest{TokenIDs: r.Tokens, ModelName: benchModel, RequestID: id}
		if sessions {
			req.SessionID = r.Session
		}
		t0 := time.Now()
		svc := c.host(i).Service
		res, err := svc.Route(ctx, req)
		if err != nil {
			return run, fmt.Errorf("loadgen: route request %d: %w", i, err)
		}
		run.route = append(run.route, time.Since(t0))
		if res.Partial {
			run.partial++
		}
		w := int(res.WorkerID) - 1
		if w < 0 || w >= len(c.engines) {
			return run, fmt.Errorf("loadgen: request %d routed to unknown worker %d", i, res.WorkerID)
		}
		cached, p, err := c.serve(w, r, req.SessionID)
		if err != nil {
			return run, err
		}
		run.tally.Add(w, len(r.Tokens), cached*c.cfg.BlockSize)
		if err := svc.PrefillDone(ctx, id); err != nil {
			return run, fmt.Errorf("loadgen: prefill_done %s: %w", id, err)
		}
		if done := i - inFlight; done >= 0 {
			if err := c.host(done).Service.Free(ctx, "q"+strconv.Itoa(done)); err != nil {
				return run, fmt.Errorf("loadgen: free q%d: %w", done, err)
			}
		}
		if p == nil {
			continue
		}
		at, err := c.visible(ctx, p, probeTimeout)
		if err != nil {
			run.timeouts++
			continue
		}
		run.lags = append(run.lags, at.Sub(p.sent))
	}
	return run, nil
}
