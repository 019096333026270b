package pipeline

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/messages"
)

// Index is what the pipeline needs from a namespace's index: where the
// coalescers send their batches, and the reads the commands make.
// *indexer.Index (one process) satisfies it, and so does the cluster
// index's adapter (clusterindex.PipelineIndex).
type Index interface {
	// PID receives the coalescers' RouterEventBatches.
	PID() *actor.PID
	Query(q *indexer.QueryRequest, timeout time.Duration) (*indexer.QueryResult, error)
	Dump(timeout time.Duration) (*indexer.DumpResult, error)
	Stats(timeout time.Duration) (*indexer.Stats, error)
	Snapshot(timeout time.Duration) (*indexer.Snapshot, error)
	RemoveWorker(w messages.WorkerID)
	Stop()
}

// CoveringIndex is an Index whose answers may cover only part of it (the
// cluster index: shards that missed the deadline or are rebuilding).
type CoveringIndex interface {
	Index
	QueryCoverage(q *indexer.QueryRequest, timeout time.Duration) (*indexer.QueryResult, Coverage, error)
}

// FencedIndex is an Index that listeners on several hosts may feed for
// a moment (the cluster's, during a stream's hand-over between hosts):
// the pipeline announces each listener it starts, before starting it, and
// the index then follows the newest listener of each stream, dropping an
// older one's late batches.
type FencedIndex interface {
	Index
	StartFeed(s messages.StreamID)
}

// IndexEnv is what the pipeline gives Config.NewIndex.
type IndexEnv struct {
	Root *actor.RootContext
	// Namespace is Config.Namespace.
	Namespace string
	// Followers get every applied batch, in order, after the index (the
	// session index, the router-event publisher); never nil entries.
	Followers []*actor.PID
	// Listeners returns the pipeline's listeners by stream (a copy, safe
	// from any goroutine): an index that can lose a slice (the cluster's)
	// asks them to rebuild their streams (listener.Rebuild).
	Listeners func() map[messages.StreamID]*actor.PID
}

// Coverage says which part of the index an answer covers. The zero value
// is a whole answer.
type Coverage struct {
	// Shards is the number of shards workers are placed on
	// (indexer.ShardOf).
	Shards int
	// Missing lists the shards that did not answer in time: their
	// workers are absent from the scores.
	Missing []int
	// Recovering lists the shards whose slice is being rebuilt: their
	// workers' scores may be low (blocks missing), never high.
	Recovering []int
}

// Partial reports whether some workers' scores are absent or may be low.
func (c Coverage) Partial() bool { return len(c.Missing) > 0 || len(c.Recovering) > 0 }

// MissingWorker reports whether w's scores are absent from the answer.
func (c Coverage) MissingWorker(w messages.WorkerID) bool {
	return len(c.Missing) > 0 && slices.Contains(c.Missing, indexer.ShardOf(w, c.Shards))
}

// RecoveringWorker reports whether w's scores may be low: its shard is
// rebuilding.
func (c Coverage) RecoveringWorker(w messages.WorkerID) bool {
	return len(c.Recovering) > 0 && slices.Contains(c.Recovering, indexer.ShardOf(w, c.Shards))
}

// localIndex starts the one-process index (indexer.Spawn).
func localIndex(cfg indexer.Config) func(IndexEnv) Index {
	return func(env IndexEnv) Index {
		cfg.Listeners = env.Listeners // a crashed shard has its streams rebuilt
		return indexer.Spawn(env.Root, cfg, env.Followers...)
	}
}
