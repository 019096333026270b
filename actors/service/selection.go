package service

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tracectx"
)

// The selection service (api.Selector): Dynamo's standalone selection
// service's operations on kvrouter's route path. A select is a route
// decision (booked or advisory), a reservation a routed request's
// booking, its output blocks the booking's decode blocks.

var _ api.Selector = (*Service)(nil)

// selectInput resolves a selection request: its namespace, block hashes
// and input length in tokens.
func (s *Service) selectInput(ctx context.Context, req api.SelectRequest) (*namespace, []messages.LocalHash, int, messages.TraceContext, error) {
	tc := tracectx.FromContext(ctx)
	if req.SessionID != "" {
		if err := s.checkSessionID(req.SessionID); err != nil {
			return nil, nil, 0, tc, err
		}
	}
	ns, err := s.lookup(req.ModelName, req.TenantID)
	if err != nil {
		return nil, nil, 0, tc, err
	}
	if len(req.TokenIDs) > 0 {
		hashes, isl := s.tracedHashes(tc, ns, req.TokenIDs, req.LoraName, req.CacheSalt)
		return ns, hashes, isl, tc, nil
	}
	if req.ISLTokens <= 0 || req.ISLTokens > routing.MaxISL {
		return nil, nil, 0, tc, api.Errorf(api.ErrInvalid, "invalid_value", "isl_tokens %d: want 1 to %d", req.ISLTokens, routing.MaxISL)
	}
	return ns, req.BlockHashes, req.ISLTokens, tc, nil
}

// Select implements api.Selector.
func (s *Service) Select(ctx context.Context, req api.SelectRequest) (api.SelectResult, error) {
	ns, hashes, isl, tc, err := s.selectInput(ctx, req)
	if err != nil {
		return api.SelectResult{}, err
	}
	d, err := s.decide(tc, ns, decideInput{hashes: hashes, isl: isl, sessionID: req.SessionID, advisory: !req.Book, reach: true,
		request: routing.Request{ID: req.SelectionID, WithScores: true, Lora: req.LoraName}})
	if err != nil {
		return api.SelectResult{}, err
	}
	dec := d.rep.Decision
	out := api.SelectResult{SelectionID: req.SelectionID, ModelName: ns.key.model, RoutingGroup: ns.key.tenant,
		WorkerID: dec.Worker.Worker, DpRank: dec.Worker.DpRank, Endpoint: s.servingOf(dec.Worker),
		BlockSize: uint32(ns.blockSize), EffectivePrefillTokens: uint64(dec.PrefillTokens)}
	out.Overlap = workerReach(dec.Worker.Worker, s.candidates(ns), d.res.Scores, ns.blockSize)
	for _, sc := range dec.Scores {
		if sc.Key == dec.Worker {
			out.PotentialDecodeBlocks = uint64(sc.DecodeBlocks + dec.RequestBlocks)
			if !req.Book {
				out.WorkerLoad = &api.WorkerLoad{ActivePrefillTokens: uint64(sc.ActivePrefillTokens + dec.PrefillTokens)}
			}
		}
	}
	return out, nil
}

// OutputBlock implements api.Selector. Output blocks are applied where
// the request was booked: a cluster member that did not book it answers
// not found (as the reference keeps output-block growth local).
func (s *Service) OutputBlock(_ context.Context, req api.OutputBlockRequest) error {
	decay := routing.NoDecay
	if req.HasDecay {
		decay = req.Decay
	}
	found, err := s.localBookkeeping(routing.Bookkeeping{ID: req.ID, Output: true, Decay: decay})
	if found || err != nil {
		return err
	}
	return unknownRequest(req.ID)
}

// Loads implements api.Selector.
func (s *Service) Loads(_ context.Context, f api.LoadsFilter) ([]api.NamespaceLoads, error) {
	out := []api.NamespaceLoads{}
	for _, ns := range s.sortedSpaces() {
		if (f.ModelName != "" && f.ModelName != ns.key.model) || (f.TenantID != "" && f.TenantID != ns.key.tenant) {
			continue
		}
		rep, err := request[*routing.LoadReply](s, ns.route, &routing.LoadRequest{Candidates: true})
		if err != nil {
			return nil, err
		}
		loads := make([]api.PotentialLoad, len(rep.Ranks))
		for i, l := range rep.Ranks {
			loads[i] = api.PotentialLoad{WorkerID: l.Key.Worker, DpRank: l.Key.DpRank, PotentialPrefillTokens: nonNeg(l.PrefillTokens),
				PotentialDecodeBlocks: nonNeg(l.Blocks), ActiveRequests: nonNeg(int64(l.PrefillRequests + l.DecodeRequests))}
		}
		sortLoads(loads)
		out = append(out, api.NamespaceLoads{ModelName: ns.key.model, RoutingGroup: ns.key.tenant, Loads: loads})
	}
	return out, nil
}

// PotentialLoads implements api.Selector: an advisory decision's scores,
// with the request's own load added to each candidate's.
func (s *Service) PotentialLoads(ctx context.Context, req api.SelectRequest) ([]api.PotentialLoad, error) {
	ns, hashes, isl, tc, err := s.selectInput(ctx, req)
	if err != nil {
		return nil, err
	}
	d, err := s.decide(tc, ns, decideInput{hashes: hashes, isl: isl, sessionID: req.SessionID, advisory: true,
		request: routing.Request{WithScores: true}})
	if err != nil {
		return nil, err
	}
	dec := d.rep.Decision
	out := make([]api.PotentialLoad, len(dec.Scores))
	for i, sc := range dec.Scores {
		out[i] = api.PotentialLoad{WorkerID: sc.Key.Worker, DpRank: sc.Key.DpRank,
			PotentialPrefillTokens: nonNeg(sc.ActivePrefillTokens + int64(isl) - sc.CachedTokens),
			PotentialDecodeBlocks:  nonNeg(sc.DecodeBlocks + dec.RequestBlocks), ActiveRequests: nonNeg(sc.Requests)}
	}
	sortLoads(out)
	return out, nil
}

// OverlapScores implements api.Selector: every candidate's reach through
// the tiers, zeros included.
func (s *Service) OverlapScores(ctx context.Context, req api.SelectRequest) (api.OverlapScores, error) {
	ns, hashes, _, tc, err := s.selectInput(ctx, req)
	if err != nil {
		return api.OverlapScores{}, err
	}
	res, err := ns.pipe.Query(&indexer.QueryRequest{Hashes: hashes, Options: radix.MatchOptions{Tiers: true, Reach: true}, Trace: tc},
		s.indexDeadline(len(hashes)))
	if err != nil {
		return api.OverlapScores{}, s.errTimeout("index query", err)
	}
	byKey := scoresByKey(res.Scores)
	out := api.OverlapScores{BlockSize: uint32(ns.blockSize), NumBlocks: len(hashes), Workers: []api.WorkerOverlap{},
		SharedCache: api.SharedCacheOverlap{Ranges: [][2]uint32{}}}
	for _, c := range s.candidates(ns) {
		dev, host, all := reachOf(byKey[c.Key])
		out.Workers = append(out.Workers, api.WorkerOverlap{WorkerID: c.Key.Worker, DpRank: c.Key.DpRank,
			DeviceBlocks: dev, HostPinnedBlocks: host, DiskBlocks: all,
			HostPinnedExtensionBlocks: host - dev, DiskExtensionBlocks: all - host, RouterCreditBlocks: float64(all)})
	}
	return out, nil
}

// candidates returns the namespace's candidate list, sorted by key.
func (s *Service) candidates(ns *namespace) []routing.Candidate {
	s.mu.Lock()
	cands := slices.Clone(ns.cands)
	s.mu.Unlock()
	slices.SortFunc(cands, func(a, b routing.Candidate) int { return compareKeys(a.Key, b.Key) })
	return cands
}

func scoresByKey(scores []radix.Score) map[messages.WorkerKey]radix.Score {
	m := make(map[messages.WorkerKey]radix.Score, len(scores))
	for _, sc := range scores {
		m[sc.Key] = sc
	}
	return m
}

// reachOf is a score's reach in blocks on device, through host and
// through every tier. A score another cluster member's shard answered
// carries no Reach (the cluster wire has none yet): it is bounded from its
// Tiers, exact when every matched block is on the fast tiers, else too
// low, never too high.
func reachOf(sc radix.Score) (dev, host, all uint32) {
	dev, host, all = sc.Reach[0], sc.Reach[1], sc.Blocks
	if host == 0 && all > 0 {
		if sc.Tiers[0] == all {
			dev = all
		}
		if sc.Tiers[0]+sc.Tiers[1] == all {
			host = all
		}
	}
	return dev, host, all
}

// workerReach is one worker's reach in tokens, the Mooncake RFC's
// per-instance shape: the deepest of its ranks per tier, and each rank's
// device reach (every candidate rank of the worker, zeros included, and
// any other rank the index scored).
func workerReach(w messages.WorkerID, cands []routing.Candidate, scores []radix.Score, blockSize int) api.TierReach {
	byKey := scoresByKey(scores)
	out := api.TierReach{DP: map[string]uint64{}}
	for _, c := range cands {
		if c.Key.Worker == w {
			addRank(&out, byKey[c.Key], c.Key.DpRank, blockSize)
		}
	}
	for _, sc := range scores {
		if sc.Key.Worker == w && !slices.ContainsFunc(cands, func(c routing.Candidate) bool { return c.Key == sc.Key }) {
			addRank(&out, sc, sc.Key.DpRank, blockSize)
		}
	}
	return out
}

// instanceReach is workerReach for every candidate worker and every
// worker the index scored, in one pass over each.
func instanceReach(cands []routing.Candidate, scores []radix.Score, blockSize int) map[messages.WorkerID]api.TierReach {
	byKey := scoresByKey(scores)
	acc := map[messages.WorkerID]*api.TierReach{}
	add := func(k messages.WorkerKey, sc radix.Score) {
		tr := acc[k.Worker]
		if tr == nil {
			tr = &api.TierReach{DP: map[string]uint64{}}
			acc[k.Worker] = tr
		}
		addRank(tr, sc, k.DpRank, blockSize)
	}
	isCand := make(map[messages.WorkerKey]bool, len(cands))
	for _, c := range cands {
		isCand[c.Key] = true
		add(c.Key, byKey[c.Key])
	}
	for _, sc := range scores {
		if !isCand[sc.Key] {
			add(sc.Key, sc)
		}
	}
	out := make(map[messages.WorkerID]api.TierReach, len(acc))
	for w, tr := range acc {
		out[w] = *tr
	}
	return out
}

// addRank adds one rank's score to its worker's reach.
func addRank(tr *api.TierReach, sc radix.Score, rank messages.DpRank, blockSize int) {
	bs := uint64(blockSize)
	dev, host, all := reachOf(sc)
	tr.DP[strconv.FormatUint(uint64(rank), 10)] = uint64(dev) * bs
	tr.GPU = max(tr.GPU, uint64(dev)*bs)
	tr.CPU = max(tr.CPU, uint64(host)*bs)
	tr.Disk = max(tr.Disk, uint64(all)*bs)
	tr.LongestMatched = max(tr.GPU, tr.CPU, tr.Disk)
}

func sortLoads(l []api.PotentialLoad) {
	slices.SortFunc(l, func(a, b api.PotentialLoad) int {
		return cmp.Or(cmp.Compare(a.WorkerID, b.WorkerID), cmp.Compare(a.DpRank, b.DpRank))
	})
}

func nonNeg(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// servingOf is a rank's registered serving endpoint ("" when none).
func (s *Service) servingOf(k messages.WorkerKey) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servingLocked(k)
}

// servingLocked is servingOf under Service.mu.
func (s *Service) servingLocked(k messages.WorkerKey) string {
	if w := s.workers[k]; w != nil {
		return w.reg.ServingEndpoint
	}
	return ""
}
