package clusterindex

import (
	"math/rand/v2"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// ShardKind is the cluster kind every member hosting shards registers
// (member.Config.Kinds).
func ShardKind() *cluster.Kind {
	return cluster.NewKind(Kind, actor.PropsFromProducer(func() actor.Actor { return &grain{} }))
}

// grain is one activation of a shard: an indexer.Shard behind the proto
// messages. It starts recovering — an activation cannot tell a new shard
// from one whose host left — until a Seed with complete = true.
type grain struct {
	shard  *indexer.Shard
	status clusterpb.ShardStatus
}

func (g *grain) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.shard = indexer.NewShard()
		g.status = clusterpb.ShardStatus{Activation: rand.Uint64(), Recovering: true}
	case *clusterpb.RouterEventBatch:
		b, err := clusterpb.ToBatch(m)
		if err != nil {
			g.reject(ctx, err)
			return
		}
		g.shard.Apply(b)
	case *clusterpb.RemoveWorker:
		g.shard.RemoveWorker(messages.WorkerID(m.Worker))
	case *clusterpb.QueryRequest:
		r := clusterpb.FromQueryResult(g.shard.Query(clusterpb.ToQuery(m)))
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.StatsRequest:
		r := clusterpb.FromStats(g.shard.Stats())
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.SnapshotRequest:
		r := clusterpb.FromSnapshot(g.shard.Snapshot())
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.DumpRequest:
		r := clusterpb.FromDump(g.shard.Dump())
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.Seed:
		g.seed(ctx, m)
	}
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
	g.shard.Apply(b)
	if m.Complete {
		g.status.Recovering = false
	}
	ctx.Respond(g.statusCopy())
}

// reject counts a message that does not convert; it is dropped.
func (g *grain) reject(ctx actor.Context, err error) {
	g.status.Rejected++
	ctx.Logger().Warn("shard grain: message rejected", "error", err, "rejected", g.status.Rejected)
}

func (g *grain) statusCopy() *clusterpb.ShardStatus {
	return &clusterpb.ShardStatus{Activation: g.status.Activation, Recovering: g.status.Recovering, Rejected: g.status.Rejected}
}
