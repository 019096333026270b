package indexer

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
)

// frontActor is where the coalescers send: it hands each batch to the
// shard of its worker and then to every follower, so both see one
// worker's batches in the order they were emitted. It holds no state but
// the PIDs.
type frontActor struct {
	shards    []*actor.PID
	followers []*actor.PID
}

func (a *frontActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.RouterEventBatch:
		if len(m.Events) == 0 && len(m.Clear) == 0 {
			SendAck(ctx, m.Ack) // nothing to apply
			return
		}
		ctx.Send(a.shards[ShardOf(batchWorker(m), len(a.shards))], m)
		for _, f := range a.followers {
			ctx.Send(f, m)
		}
	case *RemoveWorker:
		ctx.Send(a.shards[ShardOf(m.Worker, len(a.shards))], m)
	case *viaFront:
		ctx.Send(a.shards[m.shard], &orderedRead{msg: m.msg, reply: ctx.Sender()})
	}
}

// SendAck sends a batch's acknowledgement (RouterEventBatch.Ack; nil:
// none) to its listener: once the batch is applied (or, for an index that
// hands batches on across hosts, handed on), and for a batch with nothing
// to apply.
func SendAck(ctx actor.SenderContext, ack *messages.Ack) {
	if ack != nil && ack.To != nil {
		ctx.Send(ack.To, &ack.Applied)
	}
}

// viaFront is a request for one shard that passes through the front, so
// the shard answers after applying every batch the front got before it.
type viaFront struct {
	shard int
	msg   any
}

// orderedRead is a viaFront read as the shard gets it: sent, not requested
// (a request's envelope would take the default priority and pass the
// batches queued before it), at the batches' priority; the shard sends
// its answer to reply.
type orderedRead struct {
	msg   any
	reply *actor.PID
}

// GetPriority keeps an ordered read behind the batches sent before it.
func (*orderedRead) GetPriority() int8 { return messages.BackgroundPriority }

// batchWorker is the worker of a batch: one stream's coalescers emit it, so
// every event and clear names the same worker.
func batchWorker(b *messages.RouterEventBatch) messages.WorkerID {
	if len(b.Clear) > 0 {
		return b.Clear[0].Worker
	}
	return b.Events[0].WorkerID
}
