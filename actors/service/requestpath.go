package service

import (
	"context"
	"errors"
	"slices"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// What the request path (actors/frontend/requestpath: the OpenAI proxy,
// the endpoint picker) asks of the service beyond api.Backend.

// Rebook books a request this host routed in (model, tenant) against
// another registered (worker, dp_rank) of that namespace: the rank that
// really served it after the request path retried past the first choice
// (routing.Load.Move). In a cluster the other hosts see the load move (one
// pushed delta off the old rank, one onto the new). An unknown request →
// ErrNotFound; a rank not registered in the namespace → ErrInvalid.
func (s *Service) Rebook(_ context.Context, model, tenant, id string, to messages.WorkerKey) error {
	return s.move(model, tenant, &routing.Move{ID: id, To: to})
}

// MovePrefill books a split request's prefill leg against another
// prefill worker of its namespace: the alternate the request path retried
// the failed leg on. Rebook's errors; a rank that is not a registered
// prefill worker of the namespace → ErrInvalid.
func (s *Service) MovePrefill(_ context.Context, model, tenant, id string, to messages.WorkerKey) error {
	return s.move(model, tenant, &routing.Move{ID: id, To: to, Prefill: true})
}

// move is Rebook and MovePrefill: the route actor moves the booking, the
// other hosts see the load move.
func (s *Service) move(model, tenant string, mv *routing.Move) error {
	id, to := mv.ID, mv.To
	ns, err := s.lookup(model, tenant)
	if err != nil {
		return err
	}
	s.mu.Lock()
	member := ns.members[to]
	s.mu.Unlock()
	if !member {
		return api.Errorf(api.ErrInvalid, "unknown_worker", "worker %d rank %d is not registered for model %q", to.Worker, to.DpRank, model)
	}
	r, err := request[*routing.BookkeepingReply](s, ns.route, mv)
	if err != nil {
		return err
	}
	switch {
	case errors.Is(r.Err, routing.ErrUnknownRequest):
		return unknownRequest(id)
	case errors.Is(r.Err, routing.ErrNotCandidate):
		return api.Errorf(api.ErrInvalid, "unknown_worker", "worker %d rank %d is not a prefill worker of model %q", to.Worker, to.DpRank, model)
	case r.Err != nil:
		return api.Errorf(api.ErrInvalid, "invalid_request", "%v", r.Err)
	}
	if rel := r.Released; moved(rel) {
		s.pushLoad(released(rel, -1))
		rel.Key = to
		s.pushLoad(released(rel, 1))
	}
	return nil
}

// Models lists the model names with a registered worker, sorted, each
// once (over tenants): GET /v1/models.
func (s *Service) Models(context.Context) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, ns := range s.spaces {
		if len(ns.members) > 0 && !slices.Contains(out, k.model) {
			out = append(out, k.model)
		}
	}
	slices.Sort(out)
	return out
}
