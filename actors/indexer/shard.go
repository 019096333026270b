package indexer

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/mailbox"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
)

// SpanApply is a shard's span of one applied batch, a child of the
// coalescer's span the batch carries: the last span of an engine batch's
// trace.
const SpanApply = "kvrouter.index.apply"

// SpanLookup is a shard's span of one query, a child of the route
// request's span the query carries: one per shard a route touches.
const SpanLookup = "kvrouter.index.lookup"

var (
	tracer    = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/indexer")
	clearsKey = attribute.Key("kvrouter.clears")
	hashesKey = attribute.Key("kvrouter.hashes")  // query length, in blocks
	matchKey  = attribute.Key("kvrouter.matched") // streams with an overlap on this shard
	shardKey  = attribute.Key("kvrouter.shard")
)

// shardActor owns one Shard: the streams of the workers placed on it. It
// applies their batches in arrival order and answers queries for them.
type shardActor struct {
	shard     *Shard
	n, shards int // the shard's number (span attribute) and the shard count
	listeners func() map[messages.StreamID]*actor.PID
}

// shardThroughput is how many messages one run of a shard's mailbox
// handles before it yields (protoactor's default).
const shardThroughput = 300

func shardProps(n, shards int, listeners func() map[messages.StreamID]*actor.PID, d *mailbox.Dispatcher) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &shardActor{shard: NewShard(), n: n, shards: shards, listeners: listeners}
	}, mailbox.CountedPriority(mailbox.Index), actor.WithDispatcher(d))
}

func (a *shardActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Restarting:
		a.lost(ctx)
	case *messages.RouterEventBatch:
		// Deferred, so a batch whose apply panics still gives its listener
		// the credit back (the restart has the shard's streams rebuilt).
		defer SendAck(ctx, m.Ack)
		ApplyTraced(a.shard, a.n, m)
	case *QueryRequest:
		if expiry.Passed(m.Deadline, time.Now()) { // nobody waits for the lookup any more
			expiry.Count(expiry.Shard)
			m.reply.Send(shardAnswer{shard: a.n, err: expiry.ErrExpired})
			return
		}
		m.reply.Send(shardAnswer{shard: a.n, res: QueryTraced(a.shard, a.n, m)})
	case *RemoveWorker:
		a.shard.RemoveWorker(m.Worker)
	case *orderedRead:
		ctx.Send(m.reply, a.read(m.msg))
	}
}

// lost runs when the shard crashed: its successor starts empty, so the
// streams placed on it are rebuilt from the engines' replay buffers (a
// resync, then what the buffer holds) instead of staying short of blocks
// while claiming to be exact. The listeners' answers (listener.Rebuilt)
// are not awaited.
func (a *shardActor) lost(ctx actor.Context) {
	if a.listeners == nil {
		return
	}
	for s, pid := range a.listeners() {
		if ShardOf(s.Worker, a.shards) == a.n {
			ctx.Request(pid, &listener.Rebuild{Stream: s})
		}
	}
}

// read answers an ordered read (Dump, Stats, Snapshot).
func (a *shardActor) read(msg any) any {
	switch msg.(type) {
	case *DumpRequest:
		return a.shard.Dump()
	case *StatsRequest:
		return a.shard.Stats()
	case *SnapshotRequest:
		return a.shard.Snapshot()
	}
	return fmt.Errorf("indexer: unknown read %T", msg)
}

// ApplyTraced applies b to shard number n under its apply span (SpanApply,
// a child of the span b carries): for the local shard actors and the
// cluster's shard grains alike.
func ApplyTraced(s *Shard, n int, b *messages.RouterEventBatch) {
	sp := tracer.Child(b.Trace, SpanApply)
	s.Apply(b)
	if sp.Recording() {
		sp.SetAttributes(shardKey.Int(n), tracectx.Worker.Int64(int64(b.Position.Stream.Worker)),
			tracectx.Events.Int(len(b.Events)), clearsKey.Int(len(b.Clear)))
	}
	sp.End()
}

// QueryTraced answers q from shard number n under its lookup span
// (SpanLookup, a child of the route's span q carries).
func QueryTraced(s *Shard, n int, q *QueryRequest) *QueryResult {
	sp := tracer.Child(q.Trace, SpanLookup)
	res := s.Query(q)
	if sp.Recording() {
		sp.SetAttributes(shardKey.Int(n), hashesKey.Int(len(q.Hashes)), matchKey.Int(len(res.Scores)))
	}
	sp.End()
	return res
}
