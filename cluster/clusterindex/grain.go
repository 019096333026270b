package clusterindex

import (
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// reaskEvery is how often a grain asks again the members that have not
// claimed yet (a lost request, an agent not started yet).
const reaskEvery = 500 * time.Millisecond

// grain is one activation of a shard: an indexer.Shard behind the proto
// messages. It starts recovering — an activation cannot tell a new shard
// from one whose host left — and runs a census (see census): every
// member's rebuild agent claims the streams its listeners feed into the
// shard and has them re-fed from the engines' replay buffers; when each
// is re-fed, the slice is whole again. A Seed with complete = true (a
// namespace created new) ends the recovery too. Whenever a member leaves,
// a new census finds the streams nobody feeds any more and drops them.
type grain struct {
	node      *Node
	namespace string
	shard     int
	state     *indexer.Shard
	status    clusterpb.ShardStatus
	census    *census
	rounds    uint64
	fences    fences
	sub       *eventstream.Subscription
}

// topologyChanged is a ClusterTopology event passed to the grain.
type topologyChanged struct{ members []string }

// reask is the grain's timer for a census round.
type reask struct{ round uint64 }

func (g *grain) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.state = indexer.NewShard()
		g.fences = fences{}
		g.status = clusterpb.ShardStatus{Activation: rand.Uint64(), Recovering: true}
	case *cluster.ClusterInit:
		g.init(ctx, m)
	case *actor.Stopping:
		if g.sub != nil {
			ctx.ActorSystem().EventStream.Unsubscribe(g.sub)
		}
	case *clusterpb.RouterEventBatch:
		g.apply(ctx, m)
	case *clusterpb.RemoveWorker:
		g.state.RemoveWorker(messages.WorkerID(m.Worker))
		g.fences.close(messages.WorkerID(m.Worker))
	case *clusterpb.QueryRequest:
		r := clusterpb.FromQueryResult(indexer.QueryTraced(g.state, g.shard, clusterpb.ToQuery(m)))
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.StatsRequest:
		r := clusterpb.FromStats(g.state.Stats())
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.SnapshotRequest:
		r := clusterpb.FromSnapshot(g.state.Snapshot())
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.DumpRequest:
		r := clusterpb.FromDump(g.state.Dump())
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.Seed:
		g.seed(ctx, m)
	case *clusterpb.Claim:
		if c := g.census; c != nil && m.Activation == g.status.Activation && m.Round == c.round {
			c.claim(m.Member, clusterpb.ToKeys(m.Streams))
			g.settle(ctx)
		}
	case *clusterpb.Refed:
		if c := g.census; c != nil && m.Activation == g.status.Activation && m.Round == c.round {
			c.fed(clusterpb.ToKey(m.Stream), m.Exact)
			g.settle(ctx)
		}
	case *topologyChanged:
		if g.census == nil || g.census.lost(m.members) {
			g.startCensus(ctx, m.members)
		}
	case *reask:
		if c := g.census; c != nil && m.round == c.round && !c.done() {
			g.ask(ctx)
		} else if c == nil {
			g.startCensus(ctx, g.node.members())
		}
	}
}

// init learns the grain's identity and starts following the topology
// and the first census.
func (g *grain) init(ctx actor.Context, m *cluster.ClusterInit) {
	ns, shard, err := ParseIdentity(m.Identity.GetIdentity())
	if err != nil {
		g.reject(ctx, err)
		return
	}
	g.namespace, g.shard = ns, shard
	root, self := ctx.ActorSystem().Root, ctx.Self()
	g.sub = ctx.ActorSystem().EventStream.Subscribe(func(ev any) {
		if tp, ok := ev.(*cluster.ClusterTopology); ok {
			root.Send(self, &topologyChanged{members: addresses(tp.Members)})
		}
	})
	g.startCensus(ctx, g.node.members())
}

// startCensus begins a new round over members (recovering while the slice
// is); with no topology known yet it retries later.
func (g *grain) startCensus(ctx actor.Context, members []string) {
	g.rounds++
	if len(members) == 0 {
		g.census = nil
		g.later(ctx, g.rounds)
		return
	}
	var held []messages.WorkerID
	for k := range g.state.Stats().TreeSizes {
		held = append(held, k.Worker)
	}
	g.census = newCensus(g.rounds, g.status.Recovering, members, held)
	g.ask(ctx)
}

// ask sends the round's request to every member that has not claimed and
// arms the timer that asks again.
func (g *grain) ask(ctx actor.Context) {
	c := g.census
	req := &clusterpb.RebuildRequest{Namespace: g.namespace, Shard: uint32(g.shard), Activation: g.status.Activation,
		Round: c.round, Recover: c.recover}
	for _, addr := range c.asking() {
		ctx.Request(actor.NewPID(addr, AgentName), req)
	}
	g.later(ctx, c.round)
}

func (g *grain) later(ctx actor.Context, round uint64) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	time.AfterFunc(reaskEvery, func() { root.Send(self, &reask{round: round}) })
}

// settle ends a finished round: the slice is whole, orphans are dropped.
func (g *grain) settle(ctx actor.Context) {
	c := g.census
	if !c.done() {
		return
	}
	for _, w := range c.orphans() {
		g.state.RemoveWorker(w)
		g.status.Orphaned++
		ctx.Logger().Info("shard grain: dropped a stream no live member feeds", "namespace", g.namespace, "shard", g.shard, "worker", w)
	}
	g.status.Degraded += uint32(c.degraded())
	g.status.Recovering = false
	g.census = &census{round: c.round, members: c.members} // done; kept to notice members leaving
}

// apply applies a batch if its feed is the one the shard follows for its
// stream (see fences).
func (g *grain) apply(ctx actor.Context, m *clusterpb.RouterEventBatch) {
	b, err := clusterpb.ToBatch(m)
	if err != nil {
		g.reject(ctx, err)
		return
	}
	k := batchKey(b)
	ok, reset := g.fences.admit(k, m.Feed)
	if !ok {
		g.status.Stale++
		return
	}
	if reset {
		g.state.Apply(&messages.RouterEventBatch{Clear: []messages.WorkerKey{k}})
	}
	indexer.ApplyTraced(g.state, g.shard, b)
}

// seed resets the listed streams, applies the dump events and, when the
// seed completes the slice, stops reporting recovering.
func (g *grain) seed(ctx actor.Context, m *clusterpb.Seed) {
	b, err := clusterpb.ToBatch(&clusterpb.RouterEventBatch{Clear: m.Clear, Events: m.Events})
	if err != nil {
		g.reject(ctx, err)
		ctx.Respond(g.statusCopy())
		return
	}
	g.state.Apply(b)
	if m.Complete {
		g.status.Recovering = false
		if g.census != nil {
			g.census.recover = false
			clear(g.census.pending)
		}
	}
	ctx.Respond(g.statusCopy())
}

// reject counts a message that does not convert; it is dropped.
func (g *grain) reject(ctx actor.Context, err error) {
	g.status.Rejected++
	ctx.Logger().Warn("shard grain: message rejected", "error", err, "rejected", g.status.Rejected)
}

func (g *grain) statusCopy() *clusterpb.ShardStatus {
	return &clusterpb.ShardStatus{Activation: g.status.Activation, Recovering: g.status.Recovering, Rejected: g.status.Rejected,
		Degraded: g.status.Degraded, Orphaned: g.status.Orphaned, Stale: g.status.Stale}
}

// addresses lists the members' host:port.
func addresses(ms []*cluster.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Address()
	}
	return out
}
