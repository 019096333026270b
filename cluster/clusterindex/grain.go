package clusterindex

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// errEmptySequenced: a Sequenced message with nothing inside.
var errEmptySequenced = errors.New("sequenced message without a message")

// reaskEvery is how often a grain asks again the members that have not
// claimed yet (a lost request, an agent not started yet).
const reaskEvery = 500 * time.Millisecond

// grain is one activation of a shard: an indexer.Shard behind the proto
// messages. A new activation first finds out whether it replaces a live
// one (a host joined: the old activation hands its slice over, see
// handover.go) or a lost one: its first census round only asks every
// member's agent which streams it feeds and whether it hosts another
// activation of the shard. Replacing a live one, it waits for the
// Handover; otherwise it rebuilds — it starts recovering (it cannot tell
// a new shard from one whose host left) and runs a recovering census
// (see census): every member's rebuild agent claims the streams its
// listeners feed into the shard and has them re-fed from the engines'
// replay buffers; when each is re-fed, the slice is whole again. A Seed
// with complete = true (a namespace created new) ends the recovery too.
// Whenever a member leaves, a new census finds the streams nobody feeds
// any more and drops them. What the members' fronts send is numbered
// (clusterpb.Sequenced) and applied in each front's order (sequence).
type grain struct {
	node      *Node
	ci        *cluster.ClusterIdentity
	namespace string
	shard     int
	state     *indexer.Shard
	status    clusterpb.ShardStatus
	census    *census
	rounds    uint64
	fences    fences
	sub       *eventstream.Subscription
	seq       *sequence[numbered]
	gapSince  time.Time // when messages started waiting for a missing one (zero: none wait)

	// awaiting: a new activation that has not yet decided between a
	// hand-over and a rebuild; the fronts' messages wait in early.
	awaiting bool
	early    []numbered
	// moving: the activation was moved and is asking the new owner for its
	// successor; successor, once known: everything is forwarded to it.
	moving    bool
	successor *actor.PID
}

// numbered is a front's message and whom to answer.
type numbered struct {
	msg  *clusterpb.Sequenced
	from *actor.PID
}

// topologyChanged is a ClusterTopology event passed to the grain.
type topologyChanged struct{ members []string }

// reask is the grain's timer for a census round.
type reask struct{ round uint64 }

// gapCheck is the grain's timer for messages waiting behind a gap.
type gapCheck struct{}

func (g *grain) Receive(ctx actor.Context) {
	if g.successor != nil {
		g.forward(ctx)
		return
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.state = indexer.NewShard()
		g.fences = fences{}
		g.seq = newSequence[numbered]()
		g.awaiting = true
		g.status = clusterpb.ShardStatus{Activation: rand.Uint64(), Recovering: true}
	case *cluster.ClusterInit:
		g.init(ctx, m)
	case *actor.Stopping:
		if g.sub != nil {
			ctx.ActorSystem().EventStream.Unsubscribe(g.sub)
		}
		g.node.unhost(g.ci, g.status.Activation)
	case *clusterpb.Sequenced:
		g.receiveSequenced(ctx, numbered{msg: m, from: ctx.Sender()})
	case *clusterpb.QueryRequest:
		r := clusterpb.FromQueryResult(indexer.QueryTraced(g.state, g.shard, clusterpb.ToQuery(m)))
		r.Status = g.statusCopy()
		ctx.Respond(r)
	case *clusterpb.Claim:
		if c := g.census; c != nil && m.Activation == g.status.Activation && m.Round == c.round {
			c.claim(m.Member, clusterpb.ToKeys(m.Streams), m.Hosting)
			g.settle(ctx)
		}
	case *clusterpb.Handover:
		g.takeOver(ctx, m)
	case *moved:
		g.move(ctx)
	case *handoverWait:
		if g.awaiting {
			ctx.Logger().Warn("shard grain: no hand-over came; rebuilding", "namespace", g.namespace, "shard", g.shard)
			g.decide(ctx)
		}
	case *gapCheck:
		g.checkGap(ctx)
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
	default:
		g.handle(ctx, m, ctx.Sender())
	}
}

// handle applies or answers one message of a front (or of a caller
// outside one), answering to reply.
func (g *grain) handle(ctx actor.Context, msg any, reply *actor.PID) {
	var answer any
	switch m := msg.(type) {
	case *clusterpb.RouterEventBatch:
		g.apply(ctx, m)
	case *clusterpb.RemoveWorker:
		g.state.RemoveWorker(messages.WorkerID(m.Worker))
		g.fences.close(messages.WorkerID(m.Worker))
	case *clusterpb.StatsRequest:
		r := clusterpb.FromStats(g.state.Stats())
		r.Status, answer = g.statusCopy(), r
	case *clusterpb.SnapshotRequest:
		r := clusterpb.FromSnapshot(g.state.Snapshot())
		r.Status, answer = g.statusCopy(), r
	case *clusterpb.DumpRequest:
		r := clusterpb.FromDump(g.state.Dump())
		r.Status, answer = g.statusCopy(), r
	case *clusterpb.Seed:
		g.seed(ctx, m)
		answer = g.statusCopy()
	case *clusterpb.Refed:
		// A round already done ignores late re-feeds (e.g. after a Seed
		// completed the slice).
		if c := g.census; c != nil && m.Activation == g.status.Activation && m.Round == c.round && !c.done() {
			c.fed(clusterpb.ToKey(m.Stream), m.Exact)
			g.settle(ctx)
		}
	case nil:
		g.reject(ctx, errEmptySequenced)
	}
	if answer != nil && reply != nil {
		ctx.Send(reply, answer)
	}
}

// receiveSequenced passes a front's numbered message through the sequence
// (held while the activation awaits its hand-over).
func (g *grain) receiveSequenced(ctx actor.Context, n numbered) {
	if g.awaiting {
		g.early = append(g.early, n)
		if len(g.early) > g.node.cfg.MaxPending {
			ctx.Logger().Warn("shard grain: too much waiting for a hand-over; rebuilding", "namespace", g.namespace, "shard", g.shard)
			g.decide(ctx)
		}
		return
	}
	ready, stale := g.seq.admit(n.msg.Sender, n.msg.Seq, n)
	if stale {
		g.status.Stale++
	}
	for _, r := range ready {
		g.handle(ctx, unsequenced(r.msg), r.from)
	}
	switch {
	case !g.seq.gaps():
		g.gapSince = time.Time{}
	case g.gapSince.IsZero():
		g.gapSince = time.Now()
		g.after(ctx, g.node.cfg.GapWait, &gapCheck{})
	}
}

// checkGap gives up on messages missing for GapWait: what waits behind
// them is applied, and the slice, which may lack them, is rebuilt.
func (g *grain) checkGap(ctx actor.Context) {
	if g.gapSince.IsZero() {
		return
	}
	wait := g.node.cfg.GapWait
	if left := wait - time.Since(g.gapSince); left > 0 {
		g.after(ctx, left, &gapCheck{})
		return
	}
	g.gapSince = time.Time{}
	g.status.Gaps++
	ctx.Logger().Warn("shard grain: a front's message never came; rebuilding", "namespace", g.namespace, "shard", g.shard)
	for _, r := range g.seq.skip() {
		g.handle(ctx, unsequenced(r.msg), r.from)
	}
	g.status.Recovering = true
	g.startCensus(ctx, g.node.members())
}

// init learns the grain's identity and starts following the topology
// and the first census.
func (g *grain) init(ctx actor.Context, m *cluster.ClusterInit) {
	ns, shard, err := ParseIdentity(m.Identity.GetIdentity())
	if err != nil {
		g.reject(ctx, err)
		return
	}
	g.ci, g.namespace, g.shard = m.Identity, ns, shard
	root, self := ctx.ActorSystem().Root, ctx.Self()
	g.sub = ctx.ActorSystem().EventStream.Subscribe(func(ev any) {
		if tp, ok := ev.(*cluster.ClusterTopology); ok {
			root.Send(self, &topologyChanged{members: addresses(tp.Members)})
		}
	})
	g.after(ctx, g.node.cfg.HandoverWait, &handoverWait{})
	g.startCensus(ctx, g.node.members())
}

// startCensus begins a new round over members (recovering while the slice
// is, except while the activation still awaits a hand-over); with no
// topology known yet it retries later.
func (g *grain) startCensus(ctx actor.Context, members []string) {
	g.rounds++
	if len(members) == 0 {
		g.census = nil
		g.after(ctx, reaskEvery, &reask{round: g.rounds})
		return
	}
	var held []messages.WorkerID
	for k := range g.state.Stats().TreeSizes {
		held = append(held, k.Worker)
	}
	g.census = newCensus(g.rounds, g.status.Recovering && !g.awaiting, members, held)
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
	g.after(ctx, reaskEvery, &reask{round: c.round})
}

// after sends msg to the grain after d.
func (g *grain) after(ctx actor.Context, d time.Duration, msg any) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	time.AfterFunc(d, func() { root.Send(self, msg) })
}

// settle ends a finished round: the slice is whole, orphans are dropped.
// A new activation's first round decides instead: wait for the hand-over
// of the activation a member still hosts, or rebuild.
func (g *grain) settle(ctx actor.Context) {
	c := g.census
	if !c.done() {
		return
	}
	if g.awaiting {
		if !c.hosting { // else the Handover comes, or handoverWait
			g.decide(ctx)
		}
		return
	}
	for _, w := range c.orphans() {
		g.state.RemoveWorker(w)
		g.status.Orphaned++
		ctx.Logger().Info("shard grain: dropped a stream no live member feeds", "namespace", g.namespace, "shard", g.shard, "worker", w)
	}
	g.status.Degraded += uint32(c.degraded())
	g.status.Recovering = false
	done := newCensus(c.round, false, nil, nil) // done; kept to notice members leaving
	done.members = c.members
	g.census = done
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
}

// reject counts a message that does not convert; it is dropped.
func (g *grain) reject(ctx actor.Context, err error) {
	g.status.Rejected++
	ctx.Logger().Warn("shard grain: message rejected", "error", err, "rejected", g.status.Rejected)
}

func (g *grain) statusCopy() *clusterpb.ShardStatus {
	return &clusterpb.ShardStatus{Activation: g.status.Activation, Recovering: g.status.Recovering, Rejected: g.status.Rejected,
		Degraded: g.status.Degraded, Orphaned: g.status.Orphaned, Stale: g.status.Stale, Gaps: g.status.Gaps,
		HandedOver: g.status.HandedOver}
}

// addresses lists the members' host:port.
func addresses(ms []*cluster.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Address()
	}
	return out
}
