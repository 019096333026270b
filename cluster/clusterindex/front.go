package clusterindex

import (
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// frontActor is where this member's coalescers send: it converts each
// batch to its proto form and sends it to the grain of its worker's shard,
// then hands the batch to the followers.
// Everything for one shard leaves in arrival order: while the shard's PID
// is being looked up, its messages wait in a FIFO (at most maxPending;
// beyond, they are dropped and counted — the stream then shows an event-id
// gap in the shard). It never blocks on a lookup.
type frontActor struct {
	res        *resolver
	pending    [][]outgoing
	waiting    []bool
	maxPending int
	retry      time.Duration
	dropped    *atomic.Uint64
	followers  []*actor.PID
	// feeds stamps each stream's batches with the feed of the listener
	// this member started for it (startFeed); see fences.
	feeds map[messages.WorkerKey]uint64
	clock feedClock
	// id and seqs number what the front sends to each shard (see
	// sequence): id names this front, seqs[shard] is the last number used.
	id   uint64
	seqs []uint64
}

// startFeed announces a listener this member starts for a stream: its
// batches, which reach the front after this message, carry a new feed id.
type startFeed struct{ stream messages.StreamID }

type outgoing struct {
	msg    any
	sender *actor.PID // answer to, for ordered reads; nil for one-way
	// ack is a batch's acknowledgement (RouterEventBatch.Ack), sent when
	// the batch leaves the front: handed to its grain (send), or dropped.
	ack *messages.Ack
}

// resolved tells the front that a lookup for shard ended.
type resolved struct{ shard int }

// viaFront is a read for one shard ordered after the batches this member
// sent before it.
type viaFront struct {
	shard int
	msg   any
}

func (a *frontActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.RouterEventBatch:
		if len(m.Events) == 0 && len(m.Clear) == 0 {
			indexer.SendAck(ctx, m.Ack) // nothing to apply
			return
		}
		pb := clusterpb.FromBatch(m)
		pb.Feed = a.feeds[batchKey(m)]
		a.deliver(ctx, indexer.ShardOf(indexer.BatchWorker(m), len(a.pending)), outgoing{msg: pb, ack: m.Ack})
		for _, f := range a.followers {
			ctx.Send(f, m)
		}
	case *startFeed:
		a.feeds[messages.WorkerKey{Worker: m.stream.Worker, DpRank: m.stream.DpRank}] = a.clock.next(uint64(time.Now().UnixNano()))
	case *indexer.RemoveWorker:
		maps.DeleteFunc(a.feeds, func(k messages.WorkerKey, _ uint64) bool { return k.Worker == m.Worker })
		a.deliver(ctx, indexer.ShardOf(m.Worker, len(a.pending)), outgoing{msg: &clusterpb.RemoveWorker{Worker: uint64(m.Worker)}})
	case *viaFront:
		a.deliver(ctx, m.shard, outgoing{msg: m.msg, sender: ctx.Sender()})
	case *resolved:
		a.flush(ctx, m.shard)
	}
}

func (a *frontActor) deliver(ctx actor.Context, shard int, o outgoing) {
	if len(a.pending[shard]) == 0 {
		if pid := a.res.cached(shard); pid != nil {
			a.send(ctx, shard, pid, o)
			return
		}
	}
	if len(a.pending[shard]) >= a.maxPending {
		a.dropped.Add(1)
		indexer.SendAck(ctx, o.ack)
		return
	}
	a.pending[shard] = append(a.pending[shard], o)
	a.await(ctx, shard)
}

// await starts one lookup for shard, reported back as resolved; a failed
// lookup is reported after the retry pause, so a shard with no owner does
// not spin.
func (a *frontActor) await(ctx actor.Context, shard int) {
	if a.waiting[shard] {
		return
	}
	a.waiting[shard] = true
	root, self := ctx.ActorSystem().Root, ctx.Self()
	go func() {
		if a.res.get(shard, time.Now().Add(a.res.timeout)) == nil {
			time.Sleep(a.retry)
		}
		root.Send(self, &resolved{shard: shard})
	}()
}

func (a *frontActor) flush(ctx actor.Context, shard int) {
	a.waiting[shard] = false
	pid := a.res.cached(shard)
	if pid == nil {
		if len(a.pending[shard]) > 0 {
			a.await(ctx, shard)
		}
		return
	}
	for _, o := range a.pending[shard] {
		a.send(ctx, shard, pid, o)
	}
	a.pending[shard] = nil
}

// send numbers o (the shard's next seq) and sends it to the grain: a
// number is used only by a message that leaves, so the grain sees a gap
// only when a message is lost on the way.
func (a *frontActor) send(ctx actor.Context, shard int, pid *actor.PID, o outgoing) {
	a.seqs[shard]++
	msg := sequenced(a.id, a.seqs[shard], o.msg)
	if o.sender != nil {
		ctx.RequestWithCustomSender(pid, msg, o.sender)
		return
	}
	ctx.Send(pid, msg)
	// The listener gets its credit back as the batch leaves the front, not
	// once the grain has applied it (that would cost a reply from another
	// host per batch): its window bounds what waits here for an unresolved
	// shard, not the grain's mailbox.
	indexer.SendAck(ctx, o.ack)
}

// sequenced wraps a message for a shard grain in its numbered envelope.
func sequenced(sender, seq uint64, msg any) *clusterpb.Sequenced {
	s := &clusterpb.Sequenced{Sender: sender, Seq: seq}
	switch m := msg.(type) {
	case *clusterpb.RouterEventBatch:
		s.Msg = &clusterpb.Sequenced_Batch{Batch: m}
	case *clusterpb.RemoveWorker:
		s.Msg = &clusterpb.Sequenced_Remove{Remove: m}
	case *clusterpb.Seed:
		s.Msg = &clusterpb.Sequenced_Seed{Seed: m}
	case *clusterpb.StatsRequest:
		s.Msg = &clusterpb.Sequenced_Stats{Stats: m}
	case *clusterpb.SnapshotRequest:
		s.Msg = &clusterpb.Sequenced_Snapshot{Snapshot: m}
	case *clusterpb.DumpRequest:
		s.Msg = &clusterpb.Sequenced_Dump{Dump: m}
	case *clusterpb.Refed:
		s.Msg = &clusterpb.Sequenced_Refed{Refed: m}
	default:
		panic(fmt.Sprintf("clusterindex: front cannot number a %T", msg))
	}
	return s
}

// unsequenced is the message inside a Sequenced (nil if none is set).
func unsequenced(s *clusterpb.Sequenced) any {
	switch m := s.Msg.(type) {
	case *clusterpb.Sequenced_Batch:
		return m.Batch
	case *clusterpb.Sequenced_Remove:
		return m.Remove
	case *clusterpb.Sequenced_Seed:
		return m.Seed
	case *clusterpb.Sequenced_Stats:
		return m.Stats
	case *clusterpb.Sequenced_Snapshot:
		return m.Snapshot
	case *clusterpb.Sequenced_Dump:
		return m.Dump
	case *clusterpb.Sequenced_Refed:
		return m.Refed
	}
	return nil
}
