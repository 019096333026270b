package service

import (
	"context"
	"errors"

	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Reserve implements api.Selector: the route actor books the pending
// selection, or the explicit booking worked out here.
func (s *Service) Reserve(ctx context.Context, req api.ReserveRequest) (api.ReserveResult, error) {
	ns, err := s.lookup(req.ModelName, req.TenantID)
	if err != nil {
		return api.ReserveResult{}, err
	}
	m := &routing.Reserve{ID: req.SelectionID, Reply: reply.Make[*routing.ReserveReply](1)}
	if req.Explicit {
		b, err := s.explicitBooking(ctx, ns, req)
		if err != nil {
			return api.ReserveResult{}, err
		}
		m.Explicit = &b
	}
	rep, err := ask(s, ns.route, m, m.Reply)
	if err != nil {
		return api.ReserveResult{}, err
	}
	switch {
	case errors.Is(rep.Err, routing.ErrNoPending):
		return api.ReserveResult{}, api.Errorf(api.ErrNotFound, "no_pending_selection",
			"no pending selection %q for model %q, routing group %q (expired, already booked, or never selected)",
			req.SelectionID, ns.key.model, ns.key.tenant)
	case errors.Is(rep.Err, routing.ErrNotCandidate):
		return api.ReserveResult{}, api.Errorf(api.ErrNotFound, "unknown_worker",
			"worker %d dp_rank %d is not registered for model %q, routing group %q", req.WorkerID, req.DpRank, ns.key.model, ns.key.tenant)
	case rep.Err != nil:
		return api.ReserveResult{}, decisionError(rep.Err, req.SelectionID)
	}
	b := rep.Booking
	s.pushLoad(registry.RankLoad{Key: b.Key, PrefillTokens: b.PrefillTokens, Blocks: b.Blocks, Requests: 1})
	return api.ReserveResult{SelectionID: req.SelectionID, ModelName: ns.key.model, RoutingGroup: ns.key.tenant,
		WorkerID: b.Key.Worker, DpRank: b.Key.DpRank, Endpoint: s.servingOf(b.Key)}, nil
}

// explicitBooking is the load an explicit reservation books: its blocks,
// and as prefill the effective prefill tokens given, or the prompt's
// tokens the index does not hold on the named rank.
func (s *Service) explicitBooking(ctx context.Context, ns *namespace, req api.ReserveRequest) (routing.Booking, error) {
	key := messages.WorkerKey{Worker: req.WorkerID, DpRank: req.DpRank}
	_, hashes, isl, tc, err := s.selectInput(ctx, req.SelectRequest)
	if err != nil {
		return routing.Booking{}, err
	}
	b := routing.Booking{Key: key, PrefillTokens: int64(isl), Blocks: int64((isl + ns.blockSize - 1) / ns.blockSize)}
	switch {
	case req.HasEffective && req.EffectivePrefillTokens > isl:
		return b, api.Errorf(api.ErrInvalid, "invalid_value", "effective_prefill_tokens %d exceeds the prompt's %d tokens", req.EffectivePrefillTokens, isl)
	case req.HasEffective:
		b.PrefillTokens = int64(req.EffectivePrefillTokens)
	case len(hashes) > 0:
		res, err := ns.pipe.Query(&indexer.QueryRequest{Hashes: hashes, Trace: tc}, s.indexDeadline(len(hashes)))
		if err != nil {
			return b, s.errTimeout("index query", err)
		}
		for _, sc := range res.Scores {
			if sc.Key == key {
				b.PrefillTokens -= int64(min(int(sc.Blocks)*ns.blockSize, isl))
			}
		}
	}
	return b, nil
}
