package service

import (
	"cmp"
	"context"
	"slices"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/sessions"
	"github.com/kvrouter/kvrouter/messages/api"
)

// checkSessionID answers 400 invalid_session_id for an id the session
// index would not accept (session ids are untrusted input).
func (s *Service) checkSessionID(id string) error {
	if err := sessions.CheckID(id, s.cfg.Pipeline.Sessions.Index.MaxIDLen); err != nil {
		return api.Errorf(api.ErrInvalid, "invalid_session_id", "session_id: %v", err)
	}
	return nil
}

// sessionCredit returns the overlaps with the request's session credit
// added (sessions.Combine), or overlaps itself when the credit is off, the
// request names no session or the session has no lineage on a candidate.
// requestBlocks caps an effective overlap.
func (s *Service) sessionCredit(ns *namespace, id string, overlaps []routing.Overlap, requestBlocks uint32) ([]routing.Overlap, error) {
	if id == "" || s.cfg.SessionCredit == 0 {
		return overlaps, nil
	}
	s.mu.Lock()
	cands := ns.cands
	s.mu.Unlock()
	bonus, err := ns.pipe.SessionCredit(id, s.cfg.SessionCredit, cands, s.cfg.Timeout)
	if err != nil {
		return nil, s.errTimeout("session index", err)
	}
	if len(bonus) == 0 {
		return overlaps, nil
	}
	return sessions.Combine(overlaps, bonus, requestBlocks, nil), nil
}

// sortedSpaces returns every namespace, sorted by model and tenant.
func (s *Service) sortedSpaces() []*namespace {
	s.mu.Lock()
	spaces := make([]*namespace, 0, len(s.spaces))
	for _, ns := range s.spaces {
		spaces = append(spaces, ns)
	}
	s.mu.Unlock()
	slices.SortFunc(spaces, func(a, b *namespace) int {
		return cmp.Or(cmp.Compare(a.key.model, b.key.model), cmp.Compare(a.key.tenant, b.key.tenant))
	})
	return spaces
}

// Session implements api.Backend: the session's lineage in every
// namespace holding it.
func (s *Service) Session(_ context.Context, req api.SessionRequest) (api.SessionInfo, error) {
	if err := s.checkSessionID(req.ID); err != nil {
		return api.SessionInfo{}, err
	}
	out := api.SessionInfo{SessionID: req.ID}
	for _, ns := range s.sortedSpaces() {
		ss, found, err := ns.pipe.Session(req.ID, req.Chain, s.cfg.Timeout)
		if err != nil {
			return api.SessionInfo{}, s.errTimeout("session index", err)
		}
		if !found {
			continue
		}
		sn := api.SessionNamespace{ModelName: ns.key.model, TenantID: ns.key.tenant, LastSeen: ss.LastSeen}
		for _, h := range ss.Holders {
			sn.Lineages = append(sn.Lineages, api.SessionLineage{WorkerID: h.Key.Worker, DpRank: h.Key.DpRank,
				Depth: h.Depth, Blocks: uint64(h.Blocks), NewestHash: h.Newest, Updated: h.Updated, Chain: h.Chain})
		}
		out.Namespaces = append(out.Namespaces, sn)
	}
	if len(out.Namespaces) == 0 {
		return api.SessionInfo{}, unknownSession(req.ID)
	}
	return out, nil
}

// ForgetSession implements api.Backend: the session's lineage goes
// from every namespace.
func (s *Service) ForgetSession(_ context.Context, id string) error {
	if err := s.checkSessionID(id); err != nil {
		return err
	}
	held := false
	for _, ns := range s.sortedSpaces() {
		found, err := ns.pipe.ForgetSession(id, s.cfg.Timeout)
		if err != nil {
			return s.errTimeout("session index", err)
		}
		held = held || found
	}
	if !held {
		return unknownSession(id)
	}
	return nil
}

func unknownSession(id string) error {
	return api.Errorf(api.ErrNotFound, "unknown_session",
		"session %q has no lineage (never reported by an engine, forgotten, expired or evicted)", id)
}
