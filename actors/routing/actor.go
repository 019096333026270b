package routing

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/mailbox"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
)

// The route actor owns one namespace's Router (its load bookkeeping is
// mutable state, so exactly one actor touches it) and its candidate list.

// SetCandidates replaces the candidate list (registrations changed, or a
// stream's state did).
type SetCandidates struct{ Candidates []Candidate }

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
	Trace    messages.TraceContext
	Deadline time.Time
	// Reply, set by a local asker, takes the answer instead of a future
	// (package reply: no registry entry, no timer when the actor answers
	// on the asker's goroutine).
	Reply reply.Chan[*RouteReply]
}

// SpanDecide is the route actor's span of one decision.
const SpanDecide = "kvrouter.route.decide"

// Attributes of the decision span. Request and session ids are never
// attributes.
var (
	tracer        = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/routing")
	overlapKey    = attribute.Key("kvrouter.overlap_blocks")   // the chosen worker's (with session credit)
	candidatesKey = attribute.Key("kvrouter.candidates")       // candidates considered
	degradedKey   = attribute.Key("kvrouter.degraded_workers") // degraded candidates among them
	chosenDegKey  = attribute.Key("kvrouter.chosen_degraded")
	tiedKey       = attribute.Key("kvrouter.tied")
)

// RouteReply is a decision, or why there is none.
type RouteReply struct {
	Decision Decision
	Err      error
}

// Bookkeeping marks a routed request's prefill done (Free false) or frees it
// (answered with *BookkeepingReply: into Reply when set, else to the
// sender).
type Bookkeeping struct {
	ID    string
	Free  bool
	Reply reply.Chan[*BookkeepingReply]
}

// BookkeepingReply carries the result (ErrUnknownRequest and friends) and
// the load the call released (zero when none): what a
// cluster host tells the others.
type BookkeepingReply struct {
	Err      error
	Released RankLoad
}

// Move books a routed request against another rank (Load.Move; answered
// with *BookkeepingReply whose Released is the load that left the old
// rank and joined To).
type Move struct {
	ID string
	To messages.WorkerKey
}

// RemoteUpdate sets one candidate's remote load (Candidate.Remote) between
// two SetCandidates: load another router host just booked.
type RemoteUpdate struct {
	Key  messages.WorkerKey
	Load RemoteLoad
}

// LoadRequest asks for the load this route actor booked, per (worker,
// dp_rank) with a tracked request (answered with *LoadReply): what a
// cluster host shares with the others.
type LoadRequest struct{}

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
func Props(cfg Config) (*actor.Props, error) {
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return actor.PropsFromProducer(func() actor.Actor { return &routeActor{router: r} }, mailbox.Counted(mailbox.Route),
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(routeThroughput))), nil
}

type routeActor struct {
	router *Router
	cands  []Candidate
	index  map[messages.WorkerKey]int // cands by key
}

func (a *routeActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *SetCandidates:
		a.cands = slices.Clone(m.Candidates)
		a.index = make(map[messages.WorkerKey]int, len(a.cands))
		for i, c := range a.cands {
			a.index[c.Key] = i
		}
		a.router.Observe(a.cands)
	case *RemoteUpdate:
		if i, ok := a.index[m.Key]; ok {
			a.cands[i].Remote = m.Load
		}
	case *DropWorker:
		a.router.Load().DropWorker(m.Worker)
	case *RouteRequest:
		now := time.Now()
		if expiry.Passed(m.Deadline, now) { // nobody waits for the decision any more
			expiry.Count(expiry.Route)
			reply.Respond(ctx, m.Reply, &RouteReply{Err: expiry.ErrExpired})
			return
		}
		sp := tracer.Child(m.Trace, SpanDecide)
		d, err := a.router.Route(m.Request, m.Overlaps, a.cands, now)
		d.Scores = slices.Clone(d.Scores) // the Router's buffer is reused
		if sp.Recording() {
			sp.SetAttributes(candidatesKey.Int(len(a.cands)))
			if err == nil {
				sp.SetAttributes(tracectx.Worker.Int64(int64(d.Worker.Worker)), tracectx.DpRank.Int64(int64(d.Worker.DpRank)),
					overlapKey.Int64(int64(d.OverlapBlocks)), degradedKey.Int(d.DegradedCandidates),
					chosenDegKey.Bool(d.Degraded), tiedKey.Int(d.Tied))
			}
		}
		sp.End()
		reply.Respond(ctx, m.Reply, &RouteReply{Decision: d, Err: err})
	case *OutsideRequest:
		ctx.Respond(&OutsideReply{Ranks: a.router.OutsideLoads(nil)})
	case *LoadRequest:
		ctx.Respond(&LoadReply{Ranks: a.router.Load().AppendRanks(nil)})
	case *Bookkeeping:
		load := a.router.Load()
		held, _ := load.Held(m.ID)
		var err error
		if m.Free {
			err = load.Free(m.ID)
		} else {
			err = load.PrefillDone(m.ID, time.Now())
			// prefill_done releases the prefill tokens only: the request
			// and its blocks stay on the rank.
			held.Blocks, held.PrefillRequests, held.DecodeRequests = 0, 0, 0
		}
		if err != nil {
			held = RankLoad{}
		}
		reply.Respond(ctx, m.Reply, &BookkeepingReply{Err: err, Released: held})
	case *Move:
		load := a.router.Load()
		held, _ := load.Held(m.ID)
		if err := load.Move(m.ID, m.To); err != nil || held.Key == m.To {
			ctx.Respond(&BookkeepingReply{Err: err})
			return
		}
		ctx.Respond(&BookkeepingReply{Released: held})
	}
}
