package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/bench/simengine"
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

// routedReplay is what one kvrouter replay runs with: session ids or not,
// the engine model (requests in flight, arrival gap or arrival times) and
// the event-delay model, and the route actor's clock (nil: the route
// actor keeps its own).
type routedReplay struct {
	sessions bool
	inFlight int
	gap      float64
	arrivals []float64
	delay    EventDelay
	clock    *modelClock
}

// heldBatch is one served request's events waiting for their publish time,
// with what its probe needs.
type heldBatch struct {
	events []simengine.Event
	tokens []uint32
	blocks int
}

// replayRouted replays reqs one at a time through the real route path:
// route (in process), serve on the chosen engine, and publish the engine's
// cache events. The engine model (fleet.go) says when each request arrives,
// when its prefill is done and when it is freed (inFlight requests later);
// the router is told of both before the next route, as the engines'
// responses would, and with rr.clock the route actor reads the model's
// time of that arrival for all three. With sessions, the request's session id goes to the
// router and the engine.
//
// With rr.delay delayed (delay.go) a request's events are held until the
// model's clock passes its prefill end plus the publish interval: the next
// requests route meanwhile, so siblings of a prompt route before its
// blocks are in the index (predict-on-route is what sees them). Before
// each route the replay publishes every batch now due and waits until the
// index holds it — the real pipeline's lag, not the model's, and nothing
// not yet due. Without delay each request's events are published and
// waited for before the next request (the old zero-delay replay).
func (c *cluster) replayRouted(reqs []Request, rr routedReplay) (routedRun, error) {
	ctx := context.Background()
	run := routedRun{tally: NewTally(len(c.engines))}
	fleet, err := NewFleet(FleetConfig{Workers: len(c.engines), BlockSize: c.cfg.BlockSize, Capacity: c.cfg.Capacity,
		InFlight: rr.inFlight, Gap: rr.gap, Arrivals: rr.arrivals, PrefillRate: ModelPrefillRate})
	if err != nil {
		return run, err
	}
	var due publishQueue[*heldBatch]
	for i, r := range reqs {
		done, freed := fleet.Advance()
		if rr.clock != nil {
			rr.clock.set(fleet.Now()) // before the prefill completions, frees and route it times
		}
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
		now := fleet.Now()
		if err := c.publishDue(ctx, &due, now, &run); err != nil {
			return run, err
		}
		id := "q" + strconv.Itoa(i)
		req := api.RouteRequest{TokenIDs: r.Tokens, ModelName: benchModel, RequestID: id}
		if rr.sessions {
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
		if rr.delay.Delayed() {
			cached, events, err := c.engines[w].ServeDeferred(simengine.Request{Tokens: r.Tokens, SessionID: req.SessionID})
			if err != nil {
				return run, err
			}
			run.tally.Add(w, len(r.Tokens), cached*c.cfg.BlockSize)
			ttft := fleet.Book(w, len(r.Tokens), cached*c.cfg.BlockSize)
			if len(events) > 0 {
				due.push(rr.delay.publishAt(now, ttft), w, &heldBatch{events: events, tokens: r.Tokens,
					blocks: min(len(r.Tokens)/c.cfg.BlockSize, c.cfg.Capacity)})
			}
			continue
		}
		cached, p, err := c.serve(w, r, req.SessionID)
		if err != nil {
			return run, err
		}
		run.tally.Add(w, len(r.Tokens), cached*c.cfg.BlockSize)
		fleet.Book(w, len(r.Tokens), cached*c.cfg.BlockSize)
		if p != nil {
			c.await(ctx, p, &run)
		}
	}
	run.tally.TTFT = fleet.TTFT()
	return run, nil
}

// publishDue publishes every held batch due by model time now, in order,
// then waits until the index holds each worker's last one (a batch's
// blocks may be evicted by a later batch of its worker; the last one's
// cannot be).
func (c *cluster) publishDue(ctx context.Context, due *publishQueue[*heldBatch], now float64, run *routedRun) error {
	last := map[int]*probe{}
	err := due.release(now, func(w int, b *heldBatch) error {
		sent := time.Now()
		if err := c.engines[w].PublishEvents(b.events); err != nil {
			return fmt.Errorf("loadgen: publish on engine %d: %w", w+1, err)
		}
		last[w] = &probe{worker: w, tokens: b.tokens, blocks: b.blocks, sent: sent}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range last {
		c.await(ctx, p, run)
	}
	return nil
}

// await waits until p's blocks are visible and records the lag (or a
// timeout).
func (c *cluster) await(ctx context.Context, p *probe, run *routedRun) {
	at, err := c.visible(ctx, p, probeTimeout)
	if err != nil {
		run.timeouts++
		return
	}
	run.lags = append(run.lags, at.Sub(p.sent))
}
