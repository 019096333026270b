package clusterindex

import (
	"cmp"
	"errors"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// Hand-over: when a topology change places a shard on another member (a
// host joined), protoactor's placement actor poisons the old activation.
// The grain turns the poison into moved and, instead of dropping its
// slice:
//
//  1. asks the new owner's placement actor for the new activation (which
//     this may create), still applying what reaches it meanwhile;
//  2. sends it a Handover — slice (dump and positions), fences, the
//     fronts' cursors (sequence), status counters — then the messages it
//     held behind a gap, then forwards everything that still reaches it
//     (from members that have not seen the new topology yet), in order,
//     for Linger, and stops.
//
// The new activation, meanwhile, holds every front message (early): its
// first census round asks each member's agent whether it hosts another
// activation of the shard. If one does, it waits for the Handover (the
// whole wait is bounded by HandoverWait from the activation), loads it, then passes what it held through the sequence with
// the handed-over cursors — a front's messages that reached it directly
// wait for the ones still coming through the old activation, copies are
// dropped — and answers complete at once: no listener is asked to
// rebuild. If none does (the old host is gone), or no hand-over comes in
// time, it rebuilds as before (a Handover arriving later is ignored: its
// forwarded messages are older than what the rebuild applies and are
// dropped by the sequence or applied in order).

// moved is the PoisonPill of a shard grain: the placement actor poisons an
// activation when a topology change placed its identity elsewhere, and
// every activation when the member shuts down.
type moved struct{}

// handoverWait bounds a new activation's wait: armed when it starts, it
// ends the wait (a rebuild) if the first census round has not concluded
// (a member does not answer) or no Handover came.
type handoverWait struct{}

// lingerEnd ends a moved activation's forwarding.
type lingerEnd struct{}

// poisonAsMoved passes a grain's PoisonPill to it as moved (protoactor
// would stop the actor before it sees the poison).
func poisonAsMoved(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*actor.PoisonPill); ok {
			next(c, actor.WrapEnvelope(&moved{}))
			return
		}
		next(c, env)
	}
}

// move hands the slice over to the identity's new owner, or stops at once
// when there is none to hand to: the member is leaving (not in its own
// topology), the identity is still placed here (a shutdown), or the
// activation had not decided yet (it holds no slice).
func (g *grain) move(ctx actor.Context) {
	if g.moving {
		return
	}
	owner, member := g.node.placement(g.ci)
	if g.awaiting || !member || owner == "" || owner == g.node.address() {
		ctx.Stop(ctx.Self())
		return
	}
	g.moving = true
	f := ctx.RequestFuture(actor.NewPID(owner, disthash.PartitionActivatorActorName),
		&cluster.ActivationRequest{ClusterIdentity: g.ci}, g.node.cfg.LookupTimeout)
	ctx.ReenterAfter(f, func(res any, err error) {
		a, ok := res.(*cluster.ActivationResponse)
		if err != nil || !ok || a.GetPid() == nil {
			ctx.Logger().Warn("shard grain: no successor to hand over to; dropping the slice", "namespace", g.namespace,
				"shard", g.shard, "owner", owner, "error", err)
			ctx.Stop(ctx.Self())
			return
		}
		g.handOver(ctx, a.Pid)
	})
}

// handOver sends the state to the successor and starts forwarding.
func (g *grain) handOver(ctx actor.Context, to *actor.PID) {
	h := &clusterpb.Handover{From: g.status.Activation, Dump: clusterpb.FromDump(g.state.Dump()),
		Fences: fencesToProto(g.fences), Cursors: cursorsToProto(g.seq.cursors()), Status: g.statusCopy()}
	ctx.Send(to, h)
	for _, n := range g.seq.heldInOrder() {
		ctx.RequestWithCustomSender(to, n.msg, n.from)
	}
	g.successor = to
	g.node.unhost(g.ci, g.status.Activation)
	g.state, g.fences = indexer.NewShard(), fences{}
	g.after(ctx, g.node.cfg.Linger, &lingerEnd{})
	ctx.Logger().Info("shard grain: slice handed over", "namespace", g.namespace, "shard", g.shard, "to", to)
}

// forward passes what reaches a moved activation to its successor, with
// its sender, until the linger ends.
func (g *grain) forward(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *lingerEnd:
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		if g.sub != nil {
			ctx.ActorSystem().EventStream.Unsubscribe(g.sub)
		}
	case *clusterpb.Sequenced, *clusterpb.QueryRequest, *clusterpb.RouterEventBatch, *clusterpb.RemoveWorker,
		*clusterpb.Seed, *clusterpb.StatsRequest, *clusterpb.SnapshotRequest, *clusterpb.DumpRequest:
		ctx.Forward(g.successor)
	}
}

// takeOver loads a Handover into an activation still awaiting one.
func (g *grain) takeOver(ctx actor.Context, h *clusterpb.Handover) {
	if !g.awaiting {
		ctx.Logger().Warn("shard grain: hand-over after the slice was rebuilt; ignored", "namespace", g.namespace, "shard", g.shard)
		return
	}
	d, err := clusterpb.ToDump(h.GetDump())
	if err == nil {
		var fs fences
		if fs, err = fencesFromProto(h.Fences); err == nil {
			state := indexer.NewShard()
			state.Apply(&messages.RouterEventBatch{Events: d.Events})
			for _, p := range d.Positions {
				state.Apply(&messages.RouterEventBatch{Position: p})
			}
			g.state, g.fences = state, fs
			g.seq.load(cursorsFromProto(h.Cursors))
			st := h.GetStatus()
			g.status.Recovering, g.status.Rejected, g.status.Degraded = st.GetRecovering(), st.GetRejected(), st.GetDegraded()
			g.status.Orphaned, g.status.Stale, g.status.Gaps = st.GetOrphaned(), st.GetStale(), st.GetGaps()
			g.status.HandedOver = true
		}
	}
	if err != nil {
		g.reject(ctx, err) // and rebuild
	}
	g.decide(ctx)
}

// decide ends the wait of a new activation: it is hosting a slice now
// (handed over, or to rebuild), applies what it held, and starts a census
// — recovering unless the slice was handed over whole.
func (g *grain) decide(ctx actor.Context) {
	g.awaiting = false
	g.node.host(g.ci, g.status.Activation)
	early := g.early
	g.early = nil
	for _, n := range early {
		g.receiveSequenced(ctx, n)
	}
	g.startCensus(ctx, g.node.members())
}

func fencesToProto(fs fences) []*clusterpb.Fence {
	out := make([]*clusterpb.Fence, 0, len(fs))
	for _, k := range slices.SortedFunc(maps.Keys(fs), compareKeys) {
		out = append(out, &clusterpb.Fence{Stream: clusterpb.FromKey(k), Feed: fs[k].feed, Closed: fs[k].closed})
	}
	return out
}

func fencesFromProto(ps []*clusterpb.Fence) (fences, error) {
	fs := fences{}
	for _, p := range ps {
		if p.GetStream() == nil {
			return nil, errFenceWithoutStream
		}
		fs[clusterpb.ToKey(p.Stream)] = fence{feed: p.Feed, closed: p.Closed}
	}
	return fs, nil
}

func cursorsToProto(cs map[uint64]uint64) []*clusterpb.Cursor {
	out := make([]*clusterpb.Cursor, 0, len(cs))
	for _, s := range slices.Sorted(maps.Keys(cs)) {
		out = append(out, &clusterpb.Cursor{Sender: s, Seq: cs[s]})
	}
	return out
}

func cursorsFromProto(ps []*clusterpb.Cursor) map[uint64]uint64 {
	out := make(map[uint64]uint64, len(ps))
	for _, p := range ps {
		out[p.Sender] = p.Seq
	}
	return out
}

func compareKeys(a, b messages.WorkerKey) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.DpRank, b.DpRank))
}

// errFenceWithoutStream: a hand-over's fence names no stream.
var errFenceWithoutStream = errors.New("hand-over: fence without a stream")
