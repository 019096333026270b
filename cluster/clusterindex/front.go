package clusterindex

import (
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
}

// startFeed announces a listener this member starts for a stream: its
// batches, which reach the front after this message, carry a new feed id.
type startFeed struct{ stream messages.StreamID }

type outgoing struct {
	msg    any
	sender *actor.PID // answer to, for ordered reads; nil for one-way
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
			return
		}
		pb := clusterpb.FromBatch(m)
		pb.Feed = a.feeds[batchKey(m)]
		a.deliver(ctx, indexer.ShardOf(indexer.BatchWorker(m), len(a.pending)), outgoing{msg: pb})
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
			send(ctx, pid, o)
			return
		}
	}
	if len(a.pending[shard]) >= a.maxPending {
		a.dropped.Add(1)
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
		send(ctx, pid, o)
	}
	a.pending[shard] = nil
}

func send(ctx actor.Context, pid *actor.PID, o outgoing) {
	if o.sender != nil {
		ctx.RequestWithCustomSender(pid, o.msg, o.sender)
		return
	}
	ctx.Send(pid, o.msg)
}
