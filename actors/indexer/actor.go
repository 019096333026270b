// Package indexer holds the index actor: it owns one namespace's radix tree
// (package radix), applies the RouterEvents the coalescers emit, in order,
// and answers queries. Sharding the tree over several actors is the next
// step (issue 4); today one actor holds the namespace.
package indexer

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// SnapshotRequest asks for every stream's blocks (answered with *Snapshot).
// For tests and diagnostics: it copies the whole index.
type SnapshotRequest struct{}

// Snapshot is the held engine hashes per (worker, dp_rank), sorted.
type Snapshot struct {
	Blocks map[messages.WorkerKey][]messages.ExternalHash
	Stats  radix.Stats
	Size   radix.Size
}

// QueryRequest asks for the overlap of a query's local block hashes
// (answered with *QueryResult).
type QueryRequest struct {
	Hashes  []messages.LocalHash
	Options radix.MatchOptions
}

// QueryResult is a query's answer: scores deepest first, frequencies when
// asked.
type QueryResult struct {
	Scores      []radix.Score
	Frequencies []uint32
}

// RemoveWorker drops every rank of a worker (unregistered).
type RemoveWorker struct{ Worker messages.WorkerID }

// DumpRequest asks for replayable events rebuilding the index (answered
// with *DumpResult).
type DumpRequest struct{}

// DumpResult carries the dump.
type DumpResult struct{ Events []messages.RouterEvent }

// StatsRequest asks for the per-stream tree sizes and the tree's counters
// (answered with *Stats).
type StatsRequest struct{}

// Stats are the index's counters and per-stream sizes.
type Stats struct {
	Tree      radix.Stats
	Size      radix.Size
	TreeSizes map[messages.WorkerKey]int
}

// Props returns the index actor; each applied batch (events or clears) is
// then forwarded, in order, to every follower (the router-event publisher,
// the session index). Nil followers are skipped.
func Props(followers ...*actor.PID) *actor.Props {
	var then []*actor.PID
	for _, f := range followers {
		if f != nil {
			then = append(then, f)
		}
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &indexActor{tree: radix.New(radix.Config{}), then: then}
	})
}

type indexActor struct {
	tree    *radix.Tree
	then    []*actor.PID
	overlap radix.Overlap
}

func (a *indexActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.RouterEventBatch:
		for _, k := range m.Clear {
			a.tree.Reset(k)
		}
		for _, ev := range m.Events {
			a.tree.Apply(ev)
		}
		if len(m.Events) > 0 || len(m.Clear) > 0 {
			for _, f := range a.then {
				ctx.Send(f, m)
			}
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
