package routing

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/mailbox"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/actors/routing/disagg"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
)

// The route actor owns one namespace's Router (its load bookkeeping is
// mutable state, so exactly one actor touches it) and its candidate list.

// SetCandidates replaces the candidate list (registrations changed, or a
// stream's state did). EventLess names the candidates that publish no
// events, with their cache capacity in blocks (0: the default): a
// predicting route actor keeps an approximate cache of each (predict.go).
type SetCandidates struct {
	Candidates []Candidate
	EventLess  map[messages.WorkerKey]int
}

// DropWorker forgets the load of an unregistered worker.
type DropWorker struct{ Worker messages.WorkerID }

// RouteRequest asks for a decision and books the request (answered with
// *RouteReply: into Reply when set, else to the sender). Trace is the
// route request's span: the decision is recorded as its child (zero: not
// traced). Deadline, when set, is when the asker stops waiting: taken
// later, the request is answered expiry.ErrExpired, neither scored nor
// booked.
type RouteRequest struct {
	Request  Request
	Overlaps []Overlap
	// Hashes are the request's block hashes, for a predicting route actor
	// (predict.go; nil: no prediction).
	Hashes   []messages.LocalHash
	Trace    messages.TraceContext
	Deadline time.Time
	// Reply, set by a local asker, takes the answer instead of a future
	// (package reply: no registry entry, no timer when the actor answers
	// on the asker's goroutine).
	Reply reply.Chan[*RouteReply]
	// Advisory asks for the decision only (Router.Decide): nothing is
	// booked, so the request id is not checked either. An advisory
	// decision with a request id is kept as a pending selection (Pending)
	// for a later Reserve of that id.
	Advisory bool
}

// Reserve books a request under ID (answered with *ReserveReply): the
// pending selection of that id (the reference's replay form), or, when
// Explicit is set, that booking (its explicit form, which discards a
// pending selection of the id). The rank must be a candidate.
type Reserve struct {
	ID       string
	Explicit *Booking
	Reply    reply.Chan[*ReserveReply]
}

// ReserveReply is the booking made, or why none was.
type ReserveReply struct {
	Booking Booking
	Err     error
}

// SpanDecide is the route actor's span of one decision.
const SpanDecide = "kvrouter.route.decide"

// EventRoomKept marks a decision span whose choice the request's room
// rule refused (room.go): nothing was booked; the attributes name the
// rank it would have gone to.
const EventRoomKept = "kvrouter.route.room_kept"

// Attributes of the decision span. Request and session ids are never
// attributes.
var (
	tracer        = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/routing")
	overlapKey    = attribute.Key("kvrouter.overlap_blocks")   // the chosen worker's (with session credit)
	candidatesKey = attribute.Key("kvrouter.candidates")       // candidates considered
	degradedKey   = attribute.Key("kvrouter.degraded_workers") // degraded candidates among them
	chosenDegKey  = attribute.Key("kvrouter.chosen_degraded")
	tiedKey       = attribute.Key("kvrouter.tied")
	predictedKey  = attribute.Key("kvrouter.predicted_blocks") // of the chosen worker's overlap (predict.go)
	// Disaggregated namespaces only (split.go): the decision's reason
	// (api.Disagg*) and, when split, the prefill worker.
	disaggKey        = attribute.Key("kvrouter.disagg.reason")
	prefillWorkerKey = attribute.Key("kvrouter.disagg.prefill_worker")
	prefillRankKey   = attribute.Key("kvrouter.disagg.prefill_dp_rank")
)

// RouteReply is a decision, or why there is none.
type RouteReply struct {
	Decision Decision
	Err      error
	// PredictedBlocks is how many of Decision.OverlapBlocks the
	// predictions added beyond the request's Overlaps (predict.go).
	PredictedBlocks uint32
	// Disagg is the prefill/decode decision in a namespace with roles
	// (split.go); nil in one without, and for advisory decisions (which
	// never split).
	Disagg *disagg.Outcome
}

// Bookkeeping marks a routed request's prefill done (Free false) or frees it
// (answered with *BookkeepingReply: into Reply when set, else to the
// sender). Output, instead, adds one output block (Load.AddOutputBlock
// with Decay).
type Bookkeeping struct {
	ID     string
	Free   bool
	Output bool
	Decay  float64
	Reply  reply.Chan[*BookkeepingReply]
}

// BookkeepingReply carries the result (ErrUnknownRequest and friends) and
// the load the call released (zero when none): what a
// cluster host tells the others.
type BookkeepingReply struct {
	Err      error
	Released RankLoad
	// ReleasedPrefill is the load a split request's prefill leg released
	// (prefill_done and free both end it; zero when none).
	ReleasedPrefill RankLoad
}

// Move books a routed request against another rank (Load.Move; answered
// with *BookkeepingReply whose Released is the load that left the old
// rank and joined To). Prefill moves a split request's prefill leg
// instead, to another prefill-role candidate (its retry there): To must
// be one (ErrNotCandidate).
type Move struct {
	ID      string
	To      messages.WorkerKey
	Prefill bool
}

// RemoteUpdate sets one candidate's remote load (Candidate.Remote) between
// two SetCandidates: load another router host just booked.
type RemoteUpdate struct {
	Key  messages.WorkerKey
	Load RemoteLoad
}

// LoadRequest asks for the load this route actor booked, per (worker,
// dp_rank) with a tracked request (answered with *LoadReply): what a
// cluster host shares with the others. Candidates asks instead for every
// candidate's load, idle ones included, with the remote load other hosts
// booked added (what GET /loads shows).
type LoadRequest struct{ Candidates bool }

// LoadReply is the booked load (Load.AppendRanks).
type LoadReply struct{ Ranks []RankLoad }

// routeThroughput is how many messages one run of the route actor's
// mailbox handles before it yields.
const routeThroughput = 300

// Props returns a route actor with the given routing configuration. Its
// mailbox runs on the synchronized dispatcher: a request finding the
// mailbox idle is handled on the sender's goroutine (the HTTP handler's),
// one message at a time as ever, without waking another goroutine — the
// route actor only computes and answers, it never waits on another actor.
func Props(cfg Config) (*actor.Props, error) { return props(cfg, nil) }

func props(cfg Config, t *predicted.Table) (*actor.Props, error) {
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	var p *predictor
	if t != nil {
		p = &predictor{table: t}
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &routeActor{router: r, pred: p, pending: NewPending(0, 0), hits: newHitCheck(), clock: cfg.Now}
	}, mailbox.Counted(mailbox.Route),
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(routeThroughput))), nil
}

type routeActor struct {
	router  *Router
	pending *Pending
	cands   []Candidate
	index   map[messages.WorkerKey]int // cands by key
	pred    *predictor                 // nil: no predictions
	hits    *hitCheck
	clock   func() time.Time // Config.Now (nil: the wall clock)
	// roles: some candidate has a role (split.go); decode and prefill
	// are then cands' pools, rebuilt whenever cands change.
	roles           bool
	decode, prefill []Candidate
}

// now is the actor's time (Config.Now) and the wall clock's, which is
// the same reading unless a clock was injected.
func (a *routeActor) now() (now, wall time.Time) {
	wall = time.Now()
	if a.clock == nil {
		return wall, wall
	}
	return a.clock(), wall
}

// setPools rebuilds the pools from cands.
func (a *routeActor) setPools() {
	a.roles = Roles(a.cands)
	a.decode, a.prefill = a.decode[:0], a.prefill[:0]
	if a.roles {
		a.decode, a.prefill = Pools(a.cands, a.decode, a.prefill)
	}
}

// decodePool is the candidates a request's decode leg is chosen among:
// every candidate, or the decode pool of a namespace with roles.
func (a *routeActor) decodePool() []Candidate {
	if a.roles {
		return a.decode
	}
	return a.cands
}

func (a *routeActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *SetCandidates:
		a.cands = slices.Clone(m.Candidates)
		a.index = make(map[messages.WorkerKey]int, len(a.cands))
		for i, c := range a.cands {
			a.index[c.Key] = i
		}
		a.hits.apply(a.cands)
		a.router.Observe(a.cands)
		a.pred.setModes(a.cands, m.EventLess)
		a.setPools()
	case *messages.RouterEventBatch: // as an index follower
		a.pred.follow(m)
	case *PredictionsRequest:
		rep := a.pred.report()
		rep.WaitWithheld = a.router.WaitWithheld()
		ctx.Respond(rep)
	case *RemotePrediction:
		_, known := a.index[m.Key]
		now, _ := a.now()
		a.pred.remote(m, known, now)
	case *HitReport:
		if a.hits.observe(m.Report, a.cands, a.index) {
			a.setPools() // the decode and prefill pools are copies of cands
		}
	case *HitStatsRequest:
		ctx.Respond(a.hits.stats())
	case *RemoteUpdate:
		if i, ok := a.index[m.Key]; ok {
			a.cands[i].Remote = m.Load
			if a.roles {
				a.setPools()
			}
		}
	case *DropWorker:
		a.router.Load().DropWorker(m.Worker)
		a.router.PrefillLoad().DropWorker(m.Worker)
		a.pred.dropWorker(m.Worker)
		a.hits.t.ForgetWorker(m.Worker)
	case *RouteRequest:
		now, wall := a.now()
		if expiry.Passed(m.Deadline, wall) { // nobody waits for the decision any more
			expiry.Count(expiry.Route)
			reply.Respond(ctx, m.Reply, &RouteReply{Err: expiry.ErrExpired})
			return
		}
		sp := tracer.Child(m.Trace, SpanDecide)
		var d Decision
		var err error
		var predictedBlocks uint32
		var split *disagg.Outcome
		switch {
		case m.Advisory: // a selection without booking predicts nothing, never splits
			d, err = a.router.Decide(m.Request, a.pred.scored(m, now), a.decodePool())
			if err == nil && m.Request.ID != "" {
				a.pending.Remember(m.Request.ID, Booking{Key: d.Worker, PrefillTokens: d.PrefillTokens, Blocks: d.RequestBlocks}, now)
			}
		case a.roles:
			var o disagg.Outcome
			d, o, err = a.router.RouteSplit(m.Request, a.pred.scored(m, now), a.decode, a.prefill, now)
			predictedBlocks = a.pred.record(m, d, err, now)
			if err == nil || errors.Is(err, ErrFull) {
				split = &o
			}
		default:
			d, err = a.router.Route(m.Request, a.pred.scored(m, now), a.cands, now)
			predictedBlocks = a.pred.record(m, d, err, now)
		}
		d.Scores = slices.Clone(d.Scores) // the Router's buffer is reused
		if sp.Recording() {
			sp.SetAttributes(candidatesKey.Int(len(a.cands)))
			if err == nil {
				sp.SetAttributes(tracectx.Worker.Int64(int64(d.Worker.Worker)), tracectx.DpRank.Int64(int64(d.Worker.DpRank)),
					overlapKey.Int64(int64(d.OverlapBlocks)), degradedKey.Int(d.DegradedCandidates),
					chosenDegKey.Bool(d.Degraded), tiedKey.Int(d.Tied), predictedKey.Int64(int64(predictedBlocks)))
				if split != nil {
					sp.SetAttributes(disaggKey.String(split.Reason))
				}
				if split != nil && split.Split {
					sp.SetAttributes(prefillWorkerKey.Int64(int64(split.Prefill.Worker)), prefillRankKey.Int64(int64(split.Prefill.DpRank)))
				}
			}
			if errors.Is(err, api.ErrRoomKept) {
				sp.AddEvent(EventRoomKept, tracectx.Worker.Int64(int64(d.Worker.Worker)), tracectx.DpRank.Int64(int64(d.Worker.DpRank)))
			}
		}
		sp.End()
		reply.Respond(ctx, m.Reply, &RouteReply{Decision: d, Err: err, PredictedBlocks: predictedBlocks, Disagg: split})
	case *OutsideRequest:
		ctx.Respond(&OutsideReply{Ranks: a.router.OutsideLoads(nil)})
	case *PendingStatsRequest:
		ctx.Respond(&PendingStatsReply{Stats: a.pending.Stats(), Held: a.pending.Len()})
	case *LoadRequest:
		if m.Candidates {
			ctx.Respond(&LoadReply{Ranks: a.candidateLoads()})
			return
		}
		ctx.Respond(&LoadReply{Ranks: a.router.PrefillLoad().AppendRanks(a.router.Load().AppendRanks(nil))})
	case *Bookkeeping:
		load := a.router.Load()
		if m.Output {
			now, _ := a.now()
			added, err := load.AddOutputBlock(m.ID, m.Decay, now)
			reply.Respond(ctx, m.Reply, &BookkeepingReply{Err: err, Released: added})
			return
		}
		held, _ := load.Held(m.ID)
		var err error
		if m.Free {
			err = load.Free(m.ID)
		} else {
			now, _ := a.now()
			err = load.PrefillDone(m.ID, now)
			// prefill_done releases the prefill tokens only: the request
			// and its blocks stay on the rank.
			held.Blocks, held.PrefillRequests, held.DecodeRequests = 0, 0, 0
		}
		if err != nil {
			held = RankLoad{}
		}
		reply.Respond(ctx, m.Reply, &BookkeepingReply{Err: err, Released: held, ReleasedPrefill: a.router.FreePrefill(m.ID)})
	case *Reserve:
		reply.Respond(ctx, m.Reply, a.reserve(m))
	case *Move:
		load := a.router.Load()
		if m.Prefill {
			if i, ok := a.index[m.To]; !ok || a.cands[i].Role != api.RolePrefill {
				ctx.Respond(&BookkeepingReply{Err: fmt.Errorf("routing: move the prefill leg of %q to worker %d rank %d: %w", m.ID, m.To.Worker, m.To.DpRank, ErrNotCandidate)})
				return
			}
			load = a.router.PrefillLoad()
		}
		held, _ := load.Held(m.ID)
		if err := load.Move(m.ID, m.To); err != nil || held.Key == m.To {
			ctx.Respond(&BookkeepingReply{Err: err})
			return
		}
		ctx.Respond(&BookkeepingReply{Released: held})
	}
}

// candidateLoads is every candidate's load: this actor's bookkeeping plus
// the remote load other hosts booked on it.
func (a *routeActor) candidateLoads() []RankLoad {
	out := make([]RankLoad, len(a.cands))
	for i, c := range a.cands {
		l := a.router.held(c.Key)
		l.PrefillTokens += c.Remote.PrefillTokens
		l.Blocks += c.Remote.Blocks
		l.DecodeRequests += int(c.Remote.Requests) // the remote phase split is not known
		out[i] = l
	}
	return out
}

// reserve books a Reserve: the pending selection is consumed only once
// the booking is made, so a failed one can be retried.
func (a *routeActor) reserve(m *Reserve) *ReserveReply {
	now, _ := a.now()
	var b Booking
	var err error
	if m.Explicit != nil {
		b = *m.Explicit
		a.pending.Forget(m.ID, false)
	} else if b, err = a.pending.Peek(m.ID, now); err != nil {
		return &ReserveReply{Err: err}
	}
	if i, ok := a.index[b.Key]; !ok || a.cands[i].Role == api.RolePrefill { // a prefill worker is never a decode leg
		return &ReserveReply{Err: fmt.Errorf("routing: reserve %q on worker %d rank %d: %w", m.ID, b.Key.Worker, b.Key.DpRank, ErrNotCandidate)}
	}
	if err := a.router.Load().Add(m.ID, b.Key, b.PrefillTokens, b.Blocks, now); err != nil {
		return &ReserveReply{Err: err}
	}
	if m.Explicit == nil {
		a.pending.Forget(m.ID, true)
	}
	return &ReserveReply{Booking: b}
}
