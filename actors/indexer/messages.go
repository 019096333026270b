package indexer

import (
	"time"

	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/messages"
)

// QueryRequest asks for the overlap of a query's local block hashes.
// Trace is the route request's span: each shard that answers records its
// lookup as a child of it (zero: not traced). Index.Query sends one copy
// to every shard, each answering into the copy's reply channel. Deadline,
// when set, is when the asker stops waiting: a shard that takes the query
// later answers expiry.ErrExpired without looking it up (Index.Query sets
// it from its timeout when that is sooner).
type QueryRequest struct {
	Hashes   []messages.LocalHash
	Options  radix.MatchOptions
	Trace    messages.TraceContext
	Deadline time.Time
	reply    reply.Chan[shardAnswer]
}

// shardAnswer is one shard's answer to a QueryRequest: its part, or why
// there is none (expiry.ErrExpired).
type shardAnswer struct {
	shard int
	res   *QueryResult
	err   error
}

// QueryResult is a query's answer: scores deepest first, frequencies when
// asked. Among equal depths the order is unspecified (sort by Key for a
// canonical one).
type QueryResult struct {
	Scores      []radix.Score
	Frequencies []uint32
}

// RemoveWorker drops every rank of a worker (unregistered). It keeps its
// place among the batches (messages.BackgroundPriority).
type RemoveWorker struct{ Worker messages.WorkerID }

// GetPriority puts RemoveWorker with the batches in a shard's mailbox.
func (*RemoveWorker) GetPriority() int8 { return messages.BackgroundPriority }

// DumpRequest asks for replayable events rebuilding the index (answered
// with *DumpResult).
type DumpRequest struct{}

// DumpResult carries the dump: the events rebuilding every stream, and
// each stream's position (the last engine batch whose events are in the
// dump), sorted by stream.
type DumpResult struct {
	Events    []messages.RouterEvent
	Positions []messages.Position
}

// StatsRequest asks for the per-stream tree sizes and the trees' counters
// (answered with *Stats).
type StatsRequest struct{}

// Stats are the index's counters and per-stream sizes, summed over shards.
type Stats struct {
	Tree radix.Stats
	// Size sums the shards' sizes; Blocks counts tree nodes, so a block
	// held by workers on two shards counts twice.
	Size      radix.Size
	TreeSizes map[messages.WorkerKey]int
	// Shards is each shard's own size, by shard number.
	Shards []radix.Size
	// StoredBlocks counts the blocks of the stored events applied (every
	// one given to the tree, held before or not); ShardStoredBlocks is
	// each shard's count, by shard number.
	StoredBlocks      uint64
	ShardStoredBlocks []uint64
}

// SnapshotRequest asks for every stream's blocks (answered with *Snapshot).
// For tests and diagnostics: it copies the whole index.
type SnapshotRequest struct{}

// Snapshot is the held engine hashes per (worker, dp_rank), sorted.
type Snapshot struct {
	Blocks map[messages.WorkerKey][]messages.ExternalHash
	Stats  radix.Stats
	Size   radix.Size
}
