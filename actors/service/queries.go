package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/blockhash"
	"github.com/kvrouter/kvrouter/messages/tracectx"
)

// lookup returns a namespace under the lock.
func (s *Service) lookup(model, tenant string) (*namespace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.space(model, tenant, 0, false)
}

// localHashes hashes a prompt's tokens as the namespace's blocks are hashed.
func localHashes(tokens []uint32, blockSize int, lora, salt string) []messages.LocalHash {
	var h blockhash.Hasher
	raw := h.Hash(make([]uint64, 0, len(tokens)/blockSize), tokens, blockSize, blockhash.Options{Seed: blockhash.NamespaceSeed(lora, salt)})
	out := make([]messages.LocalHash, len(raw))
	for i, v := range raw {
		out[i] = messages.LocalHash(v)
	}
	return out
}

// Query implements api.Backend.
func (s *Service) Query(_ context.Context, req api.QueryRequest) (api.QueryResult, error) {
	ns, err := s.lookup(req.ModelName, req.TenantID)
	if err != nil {
		return api.QueryResult{}, err
	}
	return s.query(ns, localHashes(req.TokenIDs, ns.blockSize, req.LoraName, req.CacheSalt), req.IncludeInstances)
}

// QueryByHash implements api.Backend.
func (s *Service) QueryByHash(_ context.Context, req api.QueryByHashRequest) (api.QueryResult, error) {
	ns, err := s.lookup(req.ModelName, req.TenantID)
	if err != nil {
		return api.QueryResult{}, err
	}
	return s.query(ns, req.BlockHashes, req.IncludeInstances)
}

// perBlockDeadline is what each block of a prompt adds to the deadline of
// its index query: the walk is linear in the prompt, so a fixed deadline
// that suits 1,000 blocks would time a 65,536-block (1 M-token) prompt out
// on a busy host. bench/README.md, "Long prompts", has the measured cost.
const perBlockDeadline = time.Microsecond

// indexDeadline is the deadline of an index query of blocks blocks:
// Config.Timeout plus perBlockDeadline per block (a 1 M-token prompt at
// block size 16: 50 ms + 65 ms).
func (s *Service) indexDeadline(blocks int) time.Duration {
	return s.cfg.Timeout + time.Duration(blocks)*perBlockDeadline
}

func (s *Service) query(ns *namespace, hashes []messages.LocalHash, instances bool) (api.QueryResult, error) {
	res, err := ns.pipe.Query(&indexer.QueryRequest{Hashes: hashes,
		Options: radix.MatchOptions{Frequencies: true, TreeSizes: true, Tiers: instances, Reach: instances}}, s.indexDeadline(len(hashes)))
	if err != nil {
		return api.QueryResult{}, s.errTimeout("index query", err)
	}
	out := api.QueryResult{
		Scores:      map[messages.WorkerID]map[messages.DpRank]uint64{},
		TreeSizes:   map[messages.WorkerID]map[messages.DpRank]uint64{},
		Frequencies: make([]uint64, len(res.Frequencies)),
	}
	for i, f := range res.Frequencies {
		out.Frequencies[i] = uint64(f)
	}
	for _, sc := range res.Scores {
		put(out.Scores, sc.Key, uint64(sc.Blocks)*uint64(ns.blockSize))
		put(out.TreeSizes, sc.Key, uint64(sc.TreeSize))
	}
	if instances {
		out.Instances = instanceReach(s.candidates(ns), res.Scores, ns.blockSize)
	}
	return out, nil
}

func put(m map[messages.WorkerID]map[messages.DpRank]uint64, k messages.WorkerKey, v uint64) {
	if m[k.Worker] == nil {
		m[k.Worker] = map[messages.DpRank]uint64{}
	}
	m[k.Worker][k.DpRank] = v
}

// Route implements api.Backend: hash, ask the index, add the session
// credit, decide and book.
func (s *Service) Route(ctx context.Context, req api.RouteRequest) (api.RouteResult, error) {
	out, _, err := s.route(ctx, req)
	return out, err
}

// route is Route; it also returns the request's input length in tokens
// (for the metrics). The span in ctx (the HTTP server's) is the parent of
// the route path's spans: hashing, one lookup per index shard, the session
// credit and the decision.
func (s *Service) route(ctx context.Context, req api.RouteRequest) (api.RouteResult, int, error) {
	if req.SessionID != "" {
		if err := s.checkSessionID(req.SessionID); err != nil {
			return api.RouteResult{}, 0, err
		}
	}
	ns, err := s.lookup(req.ModelName, req.TenantID)
	if err != nil {
		return api.RouteResult{}, 0, err
	}
	tc := tracectx.FromContext(ctx)
	hashes, isl := req.BlockHashes, len(req.BlockHashes)*ns.blockSize
	if len(req.TokenIDs) > 0 {
		hashes, isl = s.tracedHashes(tc, ns, req.TokenIDs, req.LoraName, req.CacheSalt)
	}
	d, err := s.decide(tc, ns, decideInput{hashes: hashes, isl: isl, sessionID: req.SessionID,
		request: routing.Request{ID: req.RequestID, WithScores: req.IncludeScores, Lora: req.LoraName, KeepRoom: req.KeepRoom}})
	if err != nil {
		return api.RouteResult{}, 0, err
	}
	out := answer(ns, req.RequestID, isl, d.overlaps, d.res.Scores, d.rep)
	s.fillServing(&out)
	s.fillPrefill(&out, d.rep.Disagg)
	if d.cov.Partial() {
		out.Recovering, out.Partial = s.recovering(ns, d.cov), true
	}
	s.recordDecision(ns, isl, d.rep.Decision.Logit, &out)
	return out, isl, nil
}

// tracedHashes hashes a prompt's tokens under the hashing span: the
// hashes and the input length in tokens.
func (s *Service) tracedHashes(tc messages.TraceContext, ns *namespace, tokens []uint32, lora, salt string) ([]messages.LocalHash, int) {
	sp := tracer.Child(tc, SpanHash)
	hashes := localHashes(tokens, ns.blockSize, lora, salt)
	if sp.Recording() {
		sp.SetAttributes(tokensKey.Int(len(tokens)), blocksKey.Int(len(hashes)))
	}
	sp.End()
	return hashes, len(tokens)
}

// decideInput is a request resolved against its namespace: its block
// hashes, its input length in tokens, its session, and what the route
// actor gets (request.ISL, BlockSize and Hash are filled by decide).
// advisory asks for the decision without booking; reach for the index's
// per-tier reach (Score.Reach) beside the tiers.
type decideInput struct {
	hashes    []messages.LocalHash
	isl       int
	sessionID string
	request   routing.Request
	advisory  bool
	reach     bool
}

// decided is what decide learnt: the index's answer and its coverage, the
// physical overlaps, and the route actor's decision.
type decided struct {
	res      *indexer.QueryResult
	cov      pipeline.Coverage
	overlaps []routing.Overlap
	rep      *routing.RouteReply
}

// decide asks the index for the request's overlaps, adds the session
// credit and asks the route actor to decide (and, unless advisory, book;
// a booking is pushed to the cluster).
func (s *Service) decide(tc messages.TraceContext, ns *namespace, in decideInput) (decided, error) {
	res, cov, err := ns.pipe.QueryCoverage(&indexer.QueryRequest{Hashes: in.hashes,
		Options: radix.MatchOptions{Tiers: true, Reach: in.reach}, Trace: tc}, s.indexDeadline(len(in.hashes)))
	if err != nil {
		return decided{}, s.errTimeout("index query", err)
	}
	weights := DefaultTierWeights
	if s.cfg.TierWeights != nil {
		weights = *s.cfg.TierWeights
	}
	overlaps := make([]routing.Overlap, len(res.Scores))
	for i, sc := range res.Scores {
		overlaps[i] = routing.Overlap{Key: sc.Key, Blocks: weights.weighted(sc)}
	}
	requestBlocks := uint32(min((in.isl+ns.blockSize-1)/ns.blockSize, math.MaxUint32))
	scored, err := s.tracedSessionCredit(tc, ns, in.sessionID, overlaps, requestBlocks)
	if err != nil {
		return decided{}, err
	}
	req := in.request
	req.ISL, req.BlockSize = in.isl, ns.blockSize
	if n := len(in.hashes); n > 0 {
		req.Hash = uint64(in.hashes[n-1]) // identical prompts tie to the same worker
	}
	rr := &routing.RouteRequest{
		Request:  req,
		Overlaps: scored,
		Hashes:   in.hashes,
		Trace:    tc,
		Deadline: time.Now().Add(s.cfg.Timeout), // when ask stops waiting
		Reply:    reply.Make[*routing.RouteReply](1),
		Advisory: in.advisory,
	}
	rep, err := ask(s, ns.route, rr, rr.Reply)
	if err != nil {
		return decided{}, err
	}
	if rep.Err != nil {
		return decided{}, decisionError(rep.Err, req.ID)
	}
	if !in.advisory {
		d := rep.Decision
		s.pushPrediction(ns, in.hashes, scored, d)
		s.pushLoad(registry.RankLoad{Key: d.Worker, PrefillTokens: d.PrefillTokens, Blocks: d.RequestBlocks, Requests: 1})
		if o := rep.Disagg; o != nil && o.Split { // the prefill leg's booking
			s.pushLoad(registry.RankLoad{Key: o.Prefill, PrefillTokens: o.PrefillTokens, Requests: 1})
		}
	}
	return decided{res: res, cov: cov, overlaps: overlaps, rep: rep}, nil
}

// fillServing sets the registered serving endpoints of the chosen rank and
// of every scored candidate ("" for a rank registered without one).
func (s *Service) fillServing(out *api.RouteResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	serving := s.servingLocked
	out.ServingEndpoint = serving(messages.WorkerKey{Worker: out.WorkerID, DpRank: out.DpRank})
	for i := range out.Scores {
		out.Scores[i].ServingEndpoint = serving(messages.WorkerKey{Worker: out.Scores[i].WorkerID, DpRank: out.Scores[i].DpRank})
	}
}

// recovering lists the namespace's candidate workers an answer of partial
// coverage could not fully answer for, sorted.
func (s *Service) recovering(ns *namespace, cov pipeline.Coverage) []messages.WorkerID {
	s.mu.Lock()
	cands := ns.cands
	s.mu.Unlock()
	var out []messages.WorkerID
	for _, c := range cands {
		w := c.Key.Worker
		if (cov.MissingWorker(w) || cov.RecoveringWorker(w)) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// tracedSessionCredit is sessionCredit under its own span when it asks the
// session index (the session id is not an attribute).
func (s *Service) tracedSessionCredit(tc messages.TraceContext, ns *namespace, id string, overlaps []routing.Overlap, requestBlocks uint32) ([]routing.Overlap, error) {
	if id == "" || s.cfg.SessionCredit == 0 {
		return overlaps, nil
	}
	sp := tracer.Child(tc, SpanSessionCredit)
	defer sp.End()
	return s.sessionCredit(ns, id, overlaps, requestBlocks)
}

// decisionError maps the route actor's refusal to the API's errors.
func decisionError(err error, requestID string) error {
	switch {
	case errors.Is(err, routing.ErrNoCandidates):
		return api.Errorf(api.ErrUnavailable, "no_workers", "no worker is registered for this model")
	case errors.Is(err, routing.ErrDuplicateRequest):
		return api.Errorf(api.ErrConflict, "duplicate_request", "request id %q is already routed", requestID)
	case errors.Is(err, routing.ErrInvalidRequestID), errors.Is(err, routing.ErrInvalidRequest):
		return api.Errorf(api.ErrInvalid, "invalid_request", "%v", err)
	case errors.Is(err, routing.ErrFull):
		return api.Errorf(api.ErrUnavailable, "too_many_requests", "%v", err)
	case errors.Is(err, expiry.ErrExpired):
		return api.Errorf(api.ErrUnavailable, "timeout", "route actor: %v", err)
	}
	return err
}

// answer is the /route answer for the route actor's reply. It reports the
// physical overlap (the index's match, whatever tiers hold it); what the
// predictions added to the scored overlap (the tier-weighted match,
// overlaps) is predicted_blocks, what the session added
// session_credit_blocks (the router scored the sum).
func answer(ns *namespace, requestID string, isl int, overlaps []routing.Overlap, scores []radix.Score, rep *routing.RouteReply) api.RouteResult {
	d := rep.Decision
	out := api.RouteResult{WorkerID: d.Worker.Worker, DpRank: d.Worker.DpRank, Degraded: d.Degraded,
		RequestID: requestID, PredictedBlocks: rep.PredictedBlocks}
	var weighted, physical uint32
	for _, o := range overlaps {
		if o.Key == d.Worker {
			weighted = max(weighted, o.Blocks)
		}
	}
	for _, sc := range scores {
		if sc.Key == d.Worker {
			physical = max(physical, sc.Blocks)
		}
	}
	if d.OverlapBlocks > weighted {
		out.SessionCreditBlocks = d.OverlapBlocks - weighted - min(rep.PredictedBlocks, d.OverlapBlocks-weighted)
	}
	out.OverlapBlocks = physical
	out.CachedTokens = uint64(min(int(physical)*ns.blockSize, isl))
	for _, sc := range scores {
		if sc.Key == d.Worker && sc.Blocks > 0 {
			out.OverlapByTier = map[string]uint32{}
			for t, n := range sc.Tiers {
				if n > 0 {
					out.OverlapByTier[messages.StorageTier(t).String()] = n
				}
			}
		}
	}
	for _, sc := range d.Scores {
		out.Scores = append(out.Scores, api.RouteScore{WorkerID: sc.Key.Worker, DpRank: sc.Key.DpRank,
			OverlapBlocks: sc.OverlapBlocks, ActivePrefillTokens: uint64(sc.ActivePrefillTokens),
			ActiveDecodeBlocks: uint64(sc.DecodeBlocks), Logit: sc.Logit, Degraded: sc.Degraded, Saturated: sc.Saturated})
	}
	return out
}

// PrefillDone implements api.Backend.
func (s *Service) PrefillDone(_ context.Context, id string) error { return s.bookkeeping(id, false) }

// Free implements api.Backend.
func (s *Service) Free(_ context.Context, id string) error { return s.bookkeeping(id, true) }

// bookkeeping applies prefill_done or free to the request: on this host if
// it routed it, else (a cluster) on the member that did.
func (s *Service) bookkeeping(id string, free bool) error {
	found, err := s.localBookkeeping(routing.Bookkeeping{ID: id, Free: free})
	if found || err != nil {
		return err
	}
	if s.cfg.Cluster != nil {
		return s.forwardBookkeeping(id, free)
	}
	return unknownRequest(id)
}

func unknownRequest(id string) error {
	return api.Errorf(api.ErrNotFound, "unknown_request", "request %q is not routed (or already freed or expired)", id)
}

// localBookkeeping asks every namespace's route actor (request ids are
// global to the client; a namespace that does not know the id says so) to
// apply bk: found false when none tracks the request. The load it moved
// is pushed to the cluster: released by prefill_done and free, added by an
// output block.
func (s *Service) localBookkeeping(bk routing.Bookkeeping) (found bool, err error) {
	sign := int64(-1)
	if bk.Output {
		sign = 1
	}
	for _, ns := range s.sortedSpaces() {
		m := bk
		m.Reply = reply.Make[*routing.BookkeepingReply](1)
		r, err := ask(s, ns.route, &m, m.Reply)
		if err != nil {
			return false, err
		}
		if r.Err == nil {
			if rel := r.Released; moved(rel) {
				s.pushLoad(released(rel, sign))
			}
			if c, rel := s.cfg.Cluster, r.ReleasedPrefill; c != nil && moved(rel) {
				c.PushLoad(released(rel, -1))
			}
			return true, nil
		}
		if !errors.Is(r.Err, routing.ErrUnknownRequest) {
			return true, api.Errorf(api.ErrInvalid, "invalid_request", "%v", r.Err)
		}
	}
	return false, nil
}

// ask sends msg, which carries the reply channel c, to a local actor and
// waits at most the service timeout for the answer in c.
func ask[T any](s *Service, pid *actor.PID, msg any, c reply.Chan[T]) (T, error) {
	s.system.Root.Send(pid, msg)
	v, err := c.Wait(s.cfg.Timeout)
	if err != nil {
		return v, s.errTimeout("route actor", err)
	}
	return v, nil
}

// request sends msg to an actor and waits at most the service timeout.
func request[T any](s *Service, pid *actor.PID, msg any) (T, error) {
	var zero T
	res, err := reply.FutureResult(s.system.Root.RequestFuture(pid, msg, s.cfg.Timeout))
	if err != nil {
		return zero, s.errTimeout("route actor", err)
	}
	v, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("service: unexpected answer %T", res)
	}
	return v, nil
}
