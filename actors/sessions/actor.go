package sessions

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/mailbox"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
)

// The session actor owns one namespace's Index. It follows the index actor
// (indexer.Props lists it as a follower), so it sees every applied
// *messages.RouterEventBatch in order, and answers the route path and the
// operators' /sessions endpoints. The clock is read here, at the edge, and
// passed to the Index; a timer message runs Expire.

// ActorConfig configures a session actor.
type ActorConfig struct {
	// Index bounds the session index.
	Index Config
	// Now is the clock (default time.Now); tests inject their own.
	Now func() time.Time
	// ExpireEvery is how often idle sessions are dropped (default 1 min;
	// negative: only when events arrive, as Apply expires too).
	ExpireEvery time.Duration
}

// DefaultExpireEvery is ActorConfig.ExpireEvery's default.
const DefaultExpireEvery = time.Minute

// GetRequest asks for a session's lineage (answered with *GetReply).
type GetRequest struct {
	ID string
	// Chain asks for each holder's chain of engine hashes.
	Chain bool
}

// GetReply is a session's lineage; Found is false for a session the index
// does not hold.
type GetReply struct {
	Session Session
	Found   bool
}

// ForgetRequest drops a session everywhere (answered with *ForgetReply).
type ForgetRequest struct{ ID string }

// ForgetReply says whether the session was held.
type ForgetReply struct{ Found bool }

// CreditRequest asks for a route request's session credit (answered with
// *CreditReply, into Reply when set, else to the sender): Index.Credit
// with the request's session id, the weight and the namespace's
// candidates. Deadline is when the asker stops waiting (zero: never); the
// actor, which also applies every ingest batch, answers a request it
// takes later expiry.ErrExpired without computing the credit (counted,
// stage session: actors/expiry).
type CreditRequest struct {
	ID         string
	Weight     float64
	Candidates []routing.Candidate
	Deadline   time.Time
	Reply      reply.Chan[*CreditReply]
}

// CreditReply carries the bonuses (none: route as without a session), or
// Err (expiry.ErrExpired) for a request taken past its deadline.
type CreditReply struct {
	Bonus []Bonus
	Err   error
}

// DropWorker drops every rank of an unregistered worker.
type DropWorker struct{ Worker messages.WorkerID }

// StatsRequest asks for the index's counters (answered with *Stats).
type StatsRequest struct{}

// expireTick is the timer's message: run Expire.
type expireTick struct{}

// Props returns a session actor.
func Props(cfg ActorConfig) *actor.Props {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ExpireEvery == 0 {
		cfg.ExpireEvery = DefaultExpireEvery
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &sessionActor{cfg: cfg, index: New(cfg.Index)}
	}, mailbox.Counted(mailbox.Sessions))
}

type sessionActor struct {
	cfg        ActorConfig
	index      *Index
	stopTicker func()
}

func (a *sessionActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.RouterEventBatch:
		now := a.cfg.Now()
		for _, k := range m.Clear {
			a.index.Apply(messages.RouterEvent{WorkerID: k.Worker,
				Event: messages.KvCacheEvent{Kind: messages.KindCleared, DpRank: k.DpRank}}, now)
		}
		for _, ev := range m.Events {
			a.index.Apply(ev, now)
		}
	case *CreditRequest:
		if expiry.Passed(m.Deadline, a.cfg.Now()) { // nobody waits for the credit any more
			expiry.Count(expiry.Session)
			reply.Respond(ctx, m.Reply, &CreditReply{Err: expiry.ErrExpired})
			return
		}
		reply.Respond(ctx, m.Reply, &CreditReply{Bonus: a.index.Credit(m.ID, m.Weight, m.Candidates, nil)})
	case *GetRequest:
		s, ok := a.index.Get(m.ID)
		if !m.Chain {
			for i := range s.Holders {
				s.Holders[i].Chain = nil
			}
		}
		ctx.Respond(&GetReply{Session: s, Found: ok})
	case *ForgetRequest:
		ctx.Respond(&ForgetReply{Found: a.index.Forget(m.ID)})
	case *DropWorker:
		a.index.DropWorker(m.Worker)
	case *StatsRequest:
		s := a.index.Stats()
		ctx.Respond(&s)
	case expireTick:
		a.index.Expire(a.cfg.Now())
	case *actor.Started:
		if err := a.cfg.Index.Check(); err != nil {
			ctx.Logger().Warn("sessions: a bound is lowered to its cap", "error", err)
		}
		if a.cfg.ExpireEvery > 0 {
			a.stopTicker = tick(ctx.ActorSystem().Root, ctx.Self(), a.cfg.ExpireEvery)
		}
	case *actor.Stopping:
		if a.stopTicker != nil {
			a.stopTicker()
		}
	}
}

// tick sends expireTick to self every period until the returned func is
// called. A plain time.Ticker rather than protoactor's scheduler: the
// scheduler's cancel races with its timer callback (an unsynchronised read
// of the flag the cancel swaps, seen by the race detector).
func tick(root *actor.RootContext, self *actor.PID, period time.Duration) func() {
	t := time.NewTicker(period)
	done := make(chan struct{})
	go func() {
		defer t.Stop()
		for {
			select {
			case <-t.C:
				root.Send(self, expireTick{})
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}
