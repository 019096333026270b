package indexer

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
)

// SnapshotRequest asks the index actor for every stream's blocks (answered
// with *Snapshot). For tests and diagnostics.
type SnapshotRequest struct{}

// Snapshot is the held engine hashes per (worker, dp_rank), sorted.
type Snapshot struct {
	Blocks map[messages.WorkerKey][]messages.ExternalHash
	Stats  MemStats
}

// Props returns an actor that owns a MemIndex and applies RouterEventBatches
// to it in arrival order; when then is set, each batch is forwarded to it
// after being applied (the router-event publisher).
func Props(then *actor.PID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &indexActor{idx: NewMemIndex(), then: then} })
}

type indexActor struct {
	idx  *MemIndex
	then *actor.PID
}

func (a *indexActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.RouterEventBatch:
		for _, k := range m.Clear {
			a.idx.Clear(k)
		}
		for _, ev := range m.Events {
			a.idx.Apply(ev)
		}
		if a.then != nil && len(m.Events) > 0 {
			ctx.Send(a.then, m)
		}
	case *SnapshotRequest:
		s := &Snapshot{Blocks: map[messages.WorkerKey][]messages.ExternalHash{}, Stats: a.idx.Stats()}
		for _, k := range a.idx.Streams() {
			s.Blocks[k] = a.idx.Blocks(k)
		}
		ctx.Respond(s)
	}
}
