// What the members of a cluster share besides the registry: booked load
// (snapshots on request, deltas pushed as they happen), the bookkeeping
// forwarded to the member that booked, predictions and breaker trips.

package service

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// localLoads is the load this host's route actors booked: what it tells
// the other members (registry.Replica.ServeLoads).
func (s *Service) localLoads() []registry.RankLoad {
	s.mu.Lock()
	routes := make([]*actor.PID, 0, len(s.spaces))
	for _, ns := range s.spaces {
		routes = append(routes, ns.route)
	}
	s.mu.Unlock()
	var out []registry.RankLoad
	for _, pid := range routes {
		r, err := request[*routing.LoadReply](s, pid, &routing.LoadRequest{})
		if err != nil {
			continue // a busy route actor: the others see none of its load this round
		}
		for _, l := range r.Ranks {
			out = append(out, registry.RankLoad{Key: l.Key, PrefillTokens: l.PrefillTokens, Blocks: l.Blocks,
				Requests: int64(l.PrefillRequests + l.DecodeRequests)})
		}
	}
	return out
}

// remoteLoads sums, per (worker, dp_rank), the load the other members
// booked: each host books only the requests it routed, so without this a
// host spreading requests with others would see part of the fleet's load.
// A member that does not answer within the timeout counts as none (nil on
// one host).
func (s *Service) remoteLoads() map[messages.WorkerKey]routing.RemoteLoad {
	c := s.cfg.Cluster
	if c == nil {
		return nil
	}
	type reply struct {
		member string
		loads  []registry.RankLoad
		ok     bool
	}
	answers := askOthers(c, func(m string) reply {
		ls, err := c.Loads(m, s.cfg.Timeout)
		return reply{m, ls, err == nil}
	})
	answered := make(map[string]bool, len(answers))
	for _, a := range answers {
		answered[a.member] = a.ok
	}
	s.mu.Lock()
	s.reach.observe(time.Now(), answered) // /readyz: who answers this member
	s.mu.Unlock()
	out := map[messages.WorkerKey]routing.RemoteLoad{}
	for _, a := range answers {
		for _, l := range a.loads {
			r := out[l.Key]
			r.PrefillTokens, r.Blocks, r.Requests = r.PrefillTokens+l.PrefillTokens, r.Blocks+l.Blocks, r.Requests+l.Requests
			out[l.Key] = r
		}
	}
	return out
}

// released is load a bookkeeping call moved, as the delta pushed to the
// other members: sign −1 for what left rel.Key, +1 for what joined it.
func released(rel routing.RankLoad, sign int64) registry.RankLoad {
	return registry.RankLoad{Key: rel.Key, PrefillTokens: sign * rel.PrefillTokens, Blocks: sign * rel.Blocks,
		Requests: sign * int64(rel.PrefillRequests+rel.DecodeRequests)}
}

// moved reports whether a bookkeeping call released any load (a failed
// call's Released is zero).
func moved(rel routing.RankLoad) bool {
	return rel.PrefillTokens != 0 || rel.Blocks != 0 || rel.PrefillRequests+rel.DecodeRequests != 0
}

// forwardBookkeeping applies a bookkeeping call this host cannot (it did
// not route the request) on the member that routed it: each host books the
// requests it routed, and a client need not know which one that was. The
// members are asked at once; those that do not answer within the timeout
// are taken as not knowing the request.
func (s *Service) forwardBookkeeping(id string, free bool) error {
	c := s.cfg.Cluster
	type answer struct {
		found bool
		err   error
	}
	answers := askOthers(c, func(m string) answer {
		found, err := c.Bookkeep(m, id, free, s.cfg.Timeout)
		return answer{found, err}
	})
	for _, a := range answers {
		switch {
		case a.found && a.err != nil:
			return api.Errorf(api.ErrInvalid, "invalid_request", "%v", a.err)
		case a.found:
			return nil
		}
	}
	return api.Errorf(api.ErrNotFound, "unknown_request",
		"request %q is not routed by any host (or already freed or expired)", id)
}

// deltaQueue bounds the pushed loads waiting for applyDeltas; past it they
// are dropped (the next snapshot, within stateEvery, counts them anyway).
const deltaQueue = 4096

// queueDelta hands load another member pushed to applyDeltas without
// blocking the registry's actor; a full queue drops it, counted.
func (s *Service) queueDelta(_ string, l registry.RankLoad) {
	select {
	case s.deltas <- l:
	default:
		s.loadDeltas.dropped.Add(1)
	}
}

// pushLoad sends load this host booked or released to the other members
// (a no-op on one host).
func (s *Service) pushLoad(l registry.RankLoad) {
	if c := s.cfg.Cluster; c != nil {
		c.PushLoad(l)
		s.loadDeltas.sent.Add(1)
	}
}

// loadDeltaCounts counts the booked-load deltas and the predictions
// exchanged with the other members; all only grow.
type loadDeltaCounts struct {
	sent, applied, dropped             atomic.Uint64
	predSent, predApplied, predDropped atomic.Uint64
}

// predictionQueue bounds the pushed predictions waiting for
// applyPredictions; past it they are dropped (counted).
const predictionQueue = 1024

// queuePrediction hands a prediction another member pushed to
// applyPredictions without blocking the registry's actor.
func (s *Service) queuePrediction(p registry.Prediction) {
	select {
	case s.preds <- p:
	default:
		s.loadDeltas.predDropped.Add(1)
	}
}

// applyPredictions records the predictions other members push in the
// route actor of their namespace here, so a sibling this host routes
// sees where another host just sent the same prefix.
func (s *Service) applyPredictions() {
	for {
		select {
		case <-s.stop:
			return
		case p := <-s.preds:
			ns, err := s.lookup(p.Model, p.Tenant)
			if err != nil {
				s.loadDeltas.predDropped.Add(1)
				continue
			}
			s.system.Root.Send(ns.route, &routing.RemotePrediction{Key: p.Key, Hashes: p.Hashes, Carried: p.Carried})
			s.loadDeltas.predApplied.Add(1)
		}
	}
}

// pushPrediction shares the prediction a booked decision made (the
// request's hashes on the chosen worker, beyond its overlap there) with
// the other members; nothing on one host, nor with predictions off unless
// the worker is event-less (its approximate cache is predictions alone,
// kept on with them off).
func (s *Service) pushPrediction(ns *namespace, hashes []messages.LocalHash, scored []routing.Overlap, d routing.Decision) {
	c := s.cfg.Cluster
	if c == nil || len(hashes) == 0 || (s.cfg.Predictions.TTL == predicted.Off && !s.eventLess(d.Worker)) {
		return
	}
	var carried uint32
	for _, o := range scored {
		if o.Key == d.Worker {
			carried = max(carried, o.Blocks)
		}
	}
	c.PushPrediction(registry.Prediction{Model: ns.key.model, Tenant: ns.key.tenant, Key: d.Worker, Hashes: hashes, Carried: carried})
	s.loadDeltas.predSent.Add(1)
}

// LoadDeltaMetrics writes the sharing counters (Prometheus text): the
// load deltas this member pushed, and those it received, applied or
// dropped (its queue full: the next snapshot counts that load anyway);
// the predictions pushed and received; zeros on one host.
func (s *Service) LoadDeltaMetrics(w io.Writer) error {
	d := &s.loadDeltas
	_, err := fmt.Fprintf(w, "# HELP kvrouter_cluster_load_deltas_sent_total Booked-load changes this member pushed to the other members as it booked or released requests.\n"+
		"# TYPE kvrouter_cluster_load_deltas_sent_total counter\nkvrouter_cluster_load_deltas_sent_total %d\n"+
		"# HELP kvrouter_cluster_load_deltas_received_total Booked-load changes other members pushed here, by result: applied, or dropped with the queue full (the member's next load snapshot counts them).\n"+
		"# TYPE kvrouter_cluster_load_deltas_received_total counter\n"+
		"kvrouter_cluster_load_deltas_received_total{result=\"applied\"} %d\nkvrouter_cluster_load_deltas_received_total{result=\"dropped\"} %d\n"+
		"# HELP kvrouter_cluster_predictions_sent_total Predictions this member pushed to the other members as it routed (predict-on-route shared across hosts).\n"+
		"# TYPE kvrouter_cluster_predictions_sent_total counter\nkvrouter_cluster_predictions_sent_total %d\n"+
		"# HELP kvrouter_cluster_predictions_received_total Predictions other members pushed here, by result: applied to the namespace's route actor, or dropped (queue full, or a namespace this member does not have).\n"+
		"# TYPE kvrouter_cluster_predictions_received_total counter\n"+
		"kvrouter_cluster_predictions_received_total{result=\"applied\"} %d\nkvrouter_cluster_predictions_received_total{result=\"dropped\"} %d\n",
		d.sent.Load(), d.applied.Load(), d.dropped.Load(), d.predSent.Load(), d.predApplied.Load(), d.predDropped.Load())
	return err
}

// applyDeltas adds the load other members push as they book it to their
// remote load and to the route actor's candidate at once: between two
// snapshots a worker another host just chose must not look idle here
// (every host would send it the next request: herding).
func (s *Service) applyDeltas() {
	for {
		select {
		case <-s.stop:
			return
		case l := <-s.deltas:
			s.mu.Lock()
			if s.remote == nil {
				s.remote = map[messages.WorkerKey]routing.RemoteLoad{}
			}
			r := s.remote[l.Key]
			// A release may meet a snapshot that already left it out.
			r.PrefillTokens, r.Blocks = max(r.PrefillTokens+l.PrefillTokens, 0), max(r.Blocks+l.Blocks, 0)
			r.Requests = max(r.Requests+l.Requests, 0)
			s.remote[l.Key] = r
			if w := s.workers[l.Key]; w != nil {
				s.system.Root.Send(w.ns.route, &routing.RemoteUpdate{Key: l.Key, Load: r})
			}
			s.mu.Unlock()
			s.loadDeltas.applied.Add(1)
		}
	}
}

// askOthers calls ask for every other member at once and returns the
// answers, in member order.
func askOthers[T any](c *registry.Replica, ask func(member string) T) []T {
	others := c.Others()
	out := make([]T, len(others))
	var wg sync.WaitGroup
	for i, m := range others {
		wg.Go(func() { out[i] = ask(m) })
	}
	wg.Wait()
	return out
}

// ShareBreakerTrips connects the request path's circuit breakers to the
// cluster (actors/frontend/requestpath, sharedbreakers.go): remote is
// called with each endpoint another member's breaker opened on, and the
// answer pushes this member's trips to the others (nil on one host: there
// is nothing to share).
func (s *Service) ShareBreakerTrips(remote func(endpoint string)) (push func(endpoint string)) {
	c := s.cfg.Cluster
	if c == nil {
		return nil
	}
	c.ServeBreakerTrips(func(_, endpoint string) { remote(endpoint) })
	return c.PushBreakerTrip
}
