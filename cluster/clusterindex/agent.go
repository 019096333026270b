package clusterindex

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// agent is a member's rebuild agent (named AgentName): it answers a shard
// grain's RebuildRequest with the streams this member's listeners feed
// into the shard and, for a recovering round, asks each of those
// listeners to rebuild its stream (listener.Rebuild); each answer
// (listener.Rebuilt, sent once the rebuild's batches have left the
// coalescers for the index front) becomes a Refed sent through the same
// front, so it reaches the grain after them.
type agent struct {
	node     *Node
	tag      uint64
	rebuilds map[uint64]rebuilding
	// started is, per shard identity, the last (activation, round) whose
	// rebuilds were started: a request asked again (the grain's timer)
	// is answered, not rebuilt twice.
	started map[string]round
}

type rebuilding struct {
	index *Index
	shard int
	round
}

type round struct{ activation, round uint64 }

func newAgent(n *Node) *agent {
	return &agent{node: n, rebuilds: map[uint64]rebuilding{}, started: map[string]round{}}
}

func (a *agent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *clusterpb.RebuildRequest:
		a.claim(ctx, m)
	case *listener.Rebuilt:
		r, ok := a.rebuilds[m.Tag]
		if !ok {
			return
		}
		delete(a.rebuilds, m.Tag)
		key := messages.WorkerKey{Worker: m.Stream.Worker, DpRank: m.Stream.DpRank}
		ctx.Send(r.index.front, &viaFront{shard: r.shard, msg: &clusterpb.Refed{Activation: r.activation, Round: r.round.round,
			Stream: clusterpb.FromKey(key), Exact: m.Exact}})
	}
}

func (a *agent) claim(ctx actor.Context, m *clusterpb.RebuildRequest) {
	shard := int(m.Shard)
	feeds := a.node.feeds(m.Namespace, shard)
	id, rd := Identity(m.Namespace, shard), round{m.Activation, m.Round}
	c := &clusterpb.Claim{Member: a.node.address(), Activation: m.Activation, Round: m.Round, Hosting: a.node.hosting(id, m.Activation)}
	rebuild := m.Recover && a.started[id] != rd
	if rebuild {
		a.started[id] = rd
	}
	for _, f := range feeds {
		c.Streams = append(c.Streams, clusterpb.FromKey(messages.WorkerKey{Worker: f.stream.Worker, DpRank: f.stream.DpRank}))
		if rebuild {
			a.tag++
			a.rebuilds[a.tag] = rebuilding{index: f.index, shard: shard, round: rd}
			ctx.Request(f.pid, &listener.Rebuild{Stream: f.stream, Tag: a.tag})
		}
	}
	ctx.Respond(c)
}
