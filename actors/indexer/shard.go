package indexer

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
)

// shardActor owns one Shard: the streams of the workers placed on it. It
// applies their batches in arrival order and answers queries for them.
type shardActor struct{ shard *Shard }

func shardProps() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &shardActor{shard: NewShard()} })
}

func (a *shardActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.RouterEventBatch:
		a.shard.Apply(m)
	case *QueryRequest:
		ctx.Respond(a.shard.Query(m))
	case *RemoveWorker:
		a.shard.RemoveWorker(m.Worker)
	case *DumpRequest:
		ctx.Respond(a.shard.Dump())
	case *StatsRequest:
		ctx.Respond(a.shard.Stats())
	case *SnapshotRequest:
		ctx.Respond(a.shard.Snapshot())
	}
}
