package indexer

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// shardActor owns one radix.Tree: the streams of the workers placed on it.
// It applies their batches in arrival order and answers queries for them.
type shardActor struct {
	tree    *radix.Tree
	overlap radix.Overlap
}

func shardProps() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &shardActor{tree: radix.New(radix.Config{})}
	})
}

func (a *shardActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.RouterEventBatch:
		for _, k := range m.Clear {
			a.tree.Reset(k)
		}
		for _, ev := range m.Events {
			a.tree.Apply(ev)
		}
	case *QueryRequest:
		o := a.tree.FindMatches(m.Hashes, m.Options, &a.overlap)
		ctx.Respond(&QueryResult{
			Scores:      append([]radix.Score(nil), o.Scores...),
			Frequencies: append([]uint32(nil), o.Frequencies...),
		})
	case *RemoveWorker:
		a.tree.RemoveWorker(m.Worker)
	case *DumpRequest:
		ctx.Respond(&DumpResult{Events: a.tree.Dump()})
	case *StatsRequest:
		s := &Stats{Tree: a.tree.Stats(), Size: a.tree.Size(), TreeSizes: map[messages.WorkerKey]int{}}
		for _, k := range a.tree.Workers() {
			s.TreeSizes[k] = a.tree.TreeSize(k)
		}
		ctx.Respond(s)
	case *SnapshotRequest:
		s := &Snapshot{Blocks: map[messages.WorkerKey][]messages.ExternalHash{}, Stats: a.tree.Stats(), Size: a.tree.Size()}
		for _, k := range a.tree.Workers() {
			s.Blocks[k] = a.tree.Blocks(k)
		}
		ctx.Respond(s)
	}
}
