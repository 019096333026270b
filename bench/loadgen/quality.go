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
// in the trace, far more than the lag. The engine model (fleet.go, arrival
// interval gap) says when each request's prefill is done and when it is
// freed (inFlight requests later); the router is told before the next
// route, as the engines' responses would. With sessions, the request's
// session id goes to the router and the engine.
func (c *cluster) replayRouted(reqs []Request, sessions bool, inFlight int, gap float64) (routedRun, error) {
	ctx := context.Background()
	run := routedRun{tally: NewTally(len(c.engines))}
	fleet, err := NewFleet(FleetConfig{Workers: len(c.engines), BlockSize: c.cfg.BlockSize, Capacity: c.cfg.Capacity,
		InFlight: inFlight, Gap: gap, PrefillRate: ModelPrefillRate})
	if err != nil {
		return run, err
	}
	for i, r := range reqs {
		done, freed := fleet.Advance()
		for _, d := range done {
			if err := c.host(d).Service.PrefillDone(ctx, "q"+strconv.Itoa(d)); err != nil {
				return run, fmt.Errorf("loadgen: prefill_done q%d: %w", d, err)
			}
		}
		for _, d := range freed {
			if err := c.host(d).Service.Free(ctx, "q"+strconv.Itoa(d)); err != nil {
				return run, fmt.Errorf("loadgen: free q%d: %w", d, err)
			}
		}
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
		fleet.Book(w, len(r.Tokens), cached*c.cfg.BlockSize)
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
	run.tally.TTFT = fleet.TTFT()
	return run, nil
}
