package requestpath

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Backend is what the request path asks of the router: the route and
// bookkeeping calls of the HTTP API, in process (actors/service.Service
// implements it).
type Backend interface {
	Route(ctx context.Context, req api.RouteRequest) (api.RouteResult, error)
	PrefillDone(ctx context.Context, requestID string) error
	Free(ctx context.Context, requestID string) error
	// Rebook moves a routed request's booking to another rank of its
	// (model, tenant).
	Rebook(ctx context.Context, model, tenant, requestID string, to messages.WorkerKey) error
	// MovePrefill moves a split request's prefill booking to another
	// prefill worker of its (model, tenant): the alternate its failed
	// prefill leg is retried on.
	MovePrefill(ctx context.Context, model, tenant, requestID string, to messages.WorkerKey) error
	// Models lists the models with a registered worker.
	Models(ctx context.Context) []string
}

// Config configures a Path.
type Config struct {
	// ShedAboveBlocks sheds a request (ErrOverloaded: 429) when every
	// candidate already has more than this many blocks booked (the
	// routing cost's decode blocks: the blocks of every request routed to
	// the rank and not yet freed). 0 never sheds.
	ShedAboveBlocks uint64
	// MaxCandidates bounds a request's candidate list: the chosen rank and
	// its fallbacks (default DefaultMaxCandidates).
	MaxCandidates int
	// MaxInFlight bounds the bookings held at once (default
	// DefaultMaxInFlight); past it requests are shed (ErrOverloaded).
	MaxInFlight int
	// Admission, when set, bounds the route calls in flight (shared with
	// the process's other front ends: kvrouter serve's /route): a request
	// over its cap is shed at once (ErrOverloaded). It bounds the route
	// call only, not the booking that follows. Nil: no bound.
	Admission *admission.Gate
	// Guard, when set, holds the circuit breakers, the retry budget and
	// the rate limits (one per process, shared by its front ends). Nil:
	// none of them.
	Guard *Guard
	// Logger logs bookkeeping calls that fail; nil discards.
	Logger *slog.Logger
	// Metrics receives the counts (nil: a Metrics of its own, see
	// Path.Metrics).
	Metrics *Metrics
}

// Defaults of Config.
const (
	DefaultMaxCandidates = 3
	DefaultMaxInFlight   = 1 << 16
)

// Errors Route returns besides the Backend's own (which wrap api's error
// classes).
var (
	// ErrNoEndpoint: no candidate rank has a usable serving endpoint (in
	// the subset, when there is one) → 503.
	ErrNoEndpoint = errors.New("no worker with a serving endpoint")
	// ErrOverloaded: the request is shed → 429.
	ErrOverloaded = errors.New("overloaded")
	// ErrNoRoom: every candidate is saturated or over the booked-blocks
	// cap (an ErrOverloaded; flow control queues the request).
	ErrNoRoom = errors.New("no worker has room")
	// ErrBreakersOpen: every candidate's circuit breaker is open; it is
	// an ErrNoEndpoint (503).
	ErrBreakersOpen = fmt.Errorf("%w: every worker's circuit breaker is open", ErrNoEndpoint)
)

// Path routes requests and keeps their bookings while their responses
// stream: one per front end (the proxy, the picker). Safe for concurrent
// use.
type Path struct {
	be      Backend
	cfg     Config
	metrics *Metrics

	mu       sync.Mutex
	inFlight map[string]*Booking
}

// New returns a Path over be.
func New(be Backend, cfg Config) *Path {
	if cfg.MaxCandidates <= 0 {
		cfg.MaxCandidates = DefaultMaxCandidates
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = &Metrics{}
	}
	return &Path{be: be, cfg: cfg, metrics: cfg.Metrics, inFlight: map[string]*Booking{}}
}

// Metrics returns the path's counts.
func (p *Path) Metrics() *Metrics { return p.metrics }

// Models lists the models with a registered worker.
func (p *Path) Models(ctx context.Context) []string { return p.be.Models(ctx) }

// Request is one request to route.
type Request struct {
	// ID names the booking; unique among the bookings in flight.
	ID            string
	Model, Tenant string
	LoraName      string
	CacheSalt     string
	SessionID     string
	// Tokens are the prompt's token ids. Nil routes by load alone:
	// NoTokensReason says why there are none (a metric label), and
	// EstimatedTokens sizes the booked load (placeholder ids that match
	// no cached block; 0 books none).
	Tokens          []uint32
	NoTokensReason  string
	EstimatedTokens int
	// Subset, when non-nil, lists the only serving endpoints (host:port)
	// the data plane allows.
	Subset []string
	// RateKey is the key the rate limits count the request under and its
	// fairness flow in the flow-control queue (the front end's fairness
	// id); "" counts it under its tenant.
	RateKey string
	// Objective names the request's inference objective (the
	// x-gateway-inference-objective header): its priority band in the
	// flow-control queue (FlowConfig.Objectives; default band 0).
	Objective string
	// Bytes is the request's size as the queue counts it (its body).
	Bytes int64
}

// maxEstimatedTokens caps the placeholder prompt of a request without
// token ids.
const maxEstimatedTokens = 1 << 17

// placeholder is the token id of an estimated prompt: never a real token
// of any vocabulary, so its blocks match nothing an engine stored.
const placeholder = ^uint32(0)

// Route routes r and books it: the Booking lists the candidates, best
// first (at least one), the load booked on the router's choice. The
// caller must end every Booking with Done. Errors: ErrNoEndpoint,
// ErrOverloaded, ErrRateLimited, or the Backend's. With flow control on
// (GuardConfig.Flow) a request that finds no room waits in the queue
// until there is room, its TTL passes, or ctx ends (flow.go).
func (p *Path) Route(ctx context.Context, r Request) (*Booking, error) {
	key, tokens := r.RateKey, len(r.Tokens)
	if key == "" {
		key = cmp.Or(r.Tenant, api.DefaultTenant)
	}
	if r.Tokens == nil {
		tokens = min(r.EstimatedTokens, maxEstimatedTokens)
	}
	if err := p.cfg.Guard.limit(key, tokens); err != nil {
		p.metrics.decision(OutcomeRateLimited)
		return nil, err
	}
	return p.cfg.Guard.flow(ctx, r, key, func() (*Booking, error) { return p.route(ctx, r) })
}

// route is one routing attempt: route, book, or refuse.
func (p *Path) route(ctx context.Context, r Request) (*Booking, error) {
	req := api.RouteRequest{TokenIDs: r.Tokens, ModelName: r.Model, TenantID: r.Tenant, LoraName: r.LoraName,
		CacheSalt: r.CacheSalt, SessionID: r.SessionID, RequestID: r.ID, IncludeScores: true}
	if r.Tokens == nil {
		p.metrics.byLoad(r.NoTokensReason)
		if n := min(r.EstimatedTokens, maxEstimatedTokens); n > 0 {
			req.TokenIDs = make([]uint32, n)
			for i := range req.TokenIDs {
				req.TokenIDs[i] = placeholder
			}
		}
		req.LoraName, req.CacheSalt, req.SessionID = "", "", ""
	}
	if req.TenantID == "" {
		req.TenantID = api.DefaultTenant
	}
	p.mu.Lock()
	full := len(p.inFlight) >= p.cfg.MaxInFlight
	p.mu.Unlock()
	if full {
		p.metrics.decision(OutcomeShed)
		return nil, fmt.Errorf("%w: %d requests in flight", ErrOverloaded, p.cfg.MaxInFlight)
	}
	if !p.cfg.Admission.Enter() {
		p.metrics.decision(OutcomeOverCapacity)
		return nil, fmt.Errorf("%w: %d route requests in flight", ErrOverloaded, p.cfg.Admission.Max())
	}
	// Workers kept with room for higher bands: the router applies the
	// reserve before booking, the path again on the answer (reserve.go).
	keep := p.cfg.Guard.reserve(r.Objective)
	if keep > 0 {
		req.KeepRoom = api.RoomRule{Ranks: keep, AboveBlocks: p.cfg.ShedAboveBlocks}
	}
	res, err := p.be.Route(ctx, req)
	p.cfg.Admission.Leave()
	if errors.Is(err, api.ErrRoomKept) {
		p.metrics.decision(OutcomeReserved)
		return nil, fmt.Errorf("%w: %w: %w", ErrOverloaded, ErrNoRoom, err)
	}
	if err != nil {
		p.metrics.decision(OutcomeError)
		return nil, err
	}
	all, skipped := Candidates(res, r.Subset, 0)
	cands := p.admitted(all, skipped)
	p.metrics.skip(skipped)
	chosen := messages.WorkerKey{Worker: res.WorkerID, DpRank: res.DpRank}
	b := &Booking{ID: r.ID, Model: req.ModelName, Tenant: req.TenantID, Candidates: cands, CachedTokens: res.CachedTokens,
		Prefill: res.PrefillWorker, Alternate: res.PrefillAlternate, path: p, st: NewState(chosen),
		hits: hitCheck{predictedOn: chosen, promptTokens: uint64(len(r.Tokens)), byLoad: r.Tokens == nil}}
	var refuse error
	limit := p.cfg.Guard.shedAbove(r.Objective, p.cfg.ShedAboveBlocks) // less the headroom kept for higher bands
	left, held := p.reserved(all, cands, keep)
	switch why := Overloaded(cands, limit); {
	case len(cands) == 0 && skipped[SkipBreakerOpen] > 0:
		p.metrics.decision(OutcomeBreakerOpen)
		refuse = fmt.Errorf("%w (model %q)", ErrBreakersOpen, r.Model)
	case len(cands) == 0:
		p.metrics.decision(OutcomeNoEndpoint)
		refuse = fmt.Errorf("%w for model %q", ErrNoEndpoint, r.Model)
	case why == ShedBooked:
		p.metrics.decision(OutcomeShed)
		refuse = fmt.Errorf("%w: %w: every worker has more than %d blocks booked", ErrOverloaded, ErrNoRoom, limit)
	case why == ShedSaturated:
		p.metrics.decision(OutcomeSaturated)
		refuse = fmt.Errorf("%w: %w: every worker's engine reports saturation (queue, KV usage or stale metrics)", ErrOverloaded, ErrNoRoom)
	case held:
		p.metrics.decision(OutcomeReserved)
		refuse = fmt.Errorf("%w: %w: %d workers besides its own have room, %d kept for higher priority bands", ErrOverloaded, ErrNoRoom, left, keep)
	}
	if refuse == nil && !b.tryFirst() {
		p.metrics.decision(OutcomeBreakerOpen)
		refuse = fmt.Errorf("%w (model %q)", ErrBreakersOpen, r.Model)
	}
	if refuse != nil {
		b.Done(context.WithoutCancel(ctx))
		return nil, refuse
	}
	p.mu.Lock()
	_, dup := p.inFlight[r.ID]
	if !dup {
		p.inFlight[r.ID] = b
	}
	p.mu.Unlock()
	if dup { // the router refuses a duplicate id first; kept for safety
		p.metrics.decision(OutcomeError)
		return nil, api.Errorf(api.ErrConflict, "duplicate_request", "request id %q is in flight", r.ID)
	}
	p.cfg.Guard.request()
	p.metrics.decision(OutcomeRouted)
	return b, nil
}

// Lookup returns the booking in flight under id (nil when none): for a
// front end that follows a response by request id (the picker).
func (p *Path) Lookup(id string) *Booking {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight[id]
}

// InFlight is the number of bookings not yet done.
func (p *Path) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inFlight)
}

// Booking is one routed request's load while its response streams. Its
// methods report what the response did; each calls the router's
// bookkeeping at most once (State), and Done always frees. Safe for
// concurrent use.
type Booking struct {
	ID, Model, Tenant string
	// Candidates are the ranks to try, best first (never empty).
	Candidates []Candidate
	// CachedTokens is the router's choice's cached prefix, in tokens.
	CachedTokens uint64
	// Prefill is the prefill leg when the router split the request (the
	// Candidates are then decode workers; the router booked the prefill
	// load under ID until FirstByte); nil: the decode worker prefills.
	Prefill *api.PrefillLeg
	// Alternate is the prefill worker a failed prefill leg may be retried
	// on (MovePrefill); nil when none.
	Alternate *api.PrefillLeg

	path *Path
	mu   sync.Mutex
	st   State
	tk   tickets
	hits hitCheck
}

// Served says the request went to (and was accepted by) rank k; after a
// retry the booking moves there.
func (b *Booking) Served(ctx context.Context, k messages.WorkerKey) {
	b.apply(ctx, func(s *State) Action { return s.Served(k) })
}

// ServedEndpoint is Served by serving endpoint (host:port, as a data
// plane reports it); an endpoint that is none of the candidates' is
// counted and leaves the booking where it is.
func (b *Booking) ServedEndpoint(ctx context.Context, hostPort string) {
	for _, c := range b.Candidates {
		if c.Endpoint.HostPort == hostPort {
			b.Served(ctx, c.Key)
			return
		}
	}
	b.path.metrics.bookkeeping(Rebook, ResultUnknownEndpoint)
}

// FirstByte says the first response byte came back: prefill is done.
func (b *Booking) FirstByte(ctx context.Context) {
	b.apply(ctx, func(s *State) Action { return s.FirstByte() })
}

// MovePrefill moves the split request's prefill booking to its
// Alternate, on which the caller retries the prefill leg that failed: the
// alternate leg, or nil when there is none, the booking is past its
// prefill or already moved, or the router refused the move (logged and
// counted). Prefill is the alternate afterwards.
func (b *Booking) MovePrefill(ctx context.Context) *api.PrefillLeg {
	if b.Alternate == nil {
		return nil
	}
	to := messages.WorkerKey{Worker: b.Alternate.WorkerID, DpRank: b.Alternate.DpRank}
	if !b.apply(ctx, func(s *State) Action { return s.MovePrefill(to) }) {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Prefill, b.Alternate = b.Alternate, nil
	return b.Prefill
}

// Done frees the booking: the response ended, failed, was reset or
// cancelled. Calls after the first are ignored.
func (b *Booking) Done(ctx context.Context) {
	b.apply(ctx, func(s *State) Action { return s.Done() })
}

// Worker is the rank the booking is on now.
func (b *Booking) Worker() messages.WorkerKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st.Booked
}

// apply runs one observation and its bookkeeping call: true when a call
// was made and the router took it. The call runs under the booking's
// lock, so a Free never overtakes the PrefillDone before it; it is not
// cancelled with the request (a client that went away must still be
// freed).
func (b *Booking) apply(ctx context.Context, observe func(*State) Action) bool {
	ctx = context.WithoutCancel(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	a := observe(&b.st)
	if a.Ignored {
		b.path.metrics.bookkeeping(a.Kind, ResultIgnored)
		return false
	}
	var err error
	switch a.Kind {
	case None:
		return false
	case Free:
		b.releaseAll()
	}
	switch a.Kind {
	case Rebook:
		err = b.path.be.Rebook(ctx, b.Model, b.Tenant, b.ID, a.To)
	case PrefillDone:
		err = b.path.be.PrefillDone(ctx, b.ID)
	case MovePrefill:
		err = b.path.be.MovePrefill(ctx, b.Model, b.Tenant, b.ID, a.To)
	case Free:
		b.path.mu.Lock()
		routed := b.path.inFlight[b.ID] == b
		if routed {
			delete(b.path.inFlight, b.ID)
		}
		b.path.mu.Unlock()
		err = b.path.be.Free(ctx, b.ID)
		if routed {
			b.path.cfg.Guard.kick() // room freed: a queued request may go
		}
	}
	if err != nil {
		// The router expires what it cannot be told (its TTLs); the
		// booking here is over either way.
		b.path.metrics.bookkeeping(a.Kind, ResultError)
		b.path.cfg.Logger.Warn("request path: bookkeeping failed", "action", a.Kind.String(), "request_id", b.ID, "error", err)
		return false
	}
	b.path.metrics.bookkeeping(a.Kind, ResultOK)
	return true
}
