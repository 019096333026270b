package service

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages/api"
)

// What the fleet page reads besides /workers (api.FleetReader): the load
// each namespace's route actor booked, and the latest routing decisions
// (actors/decisionlog: a bounded, lossy ring the route path writes without
// waiting).

var _ api.FleetReader = (*Service)(nil)

// Loads implements api.FleetReader: the load this host's route actors
// booked, sorted by namespace, worker and rank. In a cluster each host
// books the requests it routed, so this is the host's share.
func (s *Service) Loads(ctx context.Context) ([]api.BookedLoad, error) {
	s.mu.Lock()
	spaces := make([]*namespace, 0, len(s.spaces))
	for _, ns := range s.spaces {
		spaces = append(spaces, ns)
	}
	s.mu.Unlock()
	out := []api.BookedLoad{}
	for _, ns := range spaces {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := request[*routing.LoadReply](s, ns.route, &routing.LoadRequest{})
		if err != nil {
			return nil, err
		}
		for _, l := range r.Ranks {
			out = append(out, api.BookedLoad{WorkerID: l.Key.Worker, DpRank: l.Key.DpRank, ModelName: ns.key.model,
				TenantID: ns.key.tenant, ActivePrefillTokens: l.PrefillTokens, ActiveDecodeBlocks: l.Blocks,
				Requests: int64(l.PrefillRequests + l.DecodeRequests)})
		}
	}
	slices.SortFunc(out, func(a, b api.BookedLoad) int {
		return cmp.Or(cmp.Compare(a.ModelName, b.ModelName), cmp.Compare(a.TenantID, b.TenantID),
			cmp.Compare(a.WorkerID, b.WorkerID), cmp.Compare(a.DpRank, b.DpRank))
	})
	return out, nil
}

// Decisions implements api.FleetReader.
func (s *Service) Decisions(context.Context) (api.DecisionLog, error) {
	return s.decisions.Snapshot(), nil
}

// recordDecision keeps one answered route in the decision log (lossy: it
// never waits).
func (s *Service) recordDecision(ns *namespace, isl int, logit float64, out *api.RouteResult) {
	s.decisions.Record(api.Decision{At: time.Now(), ModelName: ns.key.model, TenantID: ns.key.tenant, PromptTokens: isl,
		WorkerID: out.WorkerID, DpRank: out.DpRank, OverlapBlocks: out.OverlapBlocks, CachedTokens: out.CachedTokens,
		SessionCreditBlocks: out.SessionCreditBlocks, Logit: logit, Degraded: out.Degraded}, out.Scores)
}
