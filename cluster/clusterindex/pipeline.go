package clusterindex

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/messages"
)

// PipelineIndex is a namespace's cluster index as a pipeline.Index (what
// Node.NewIndex returns). Query answers from the shards that answer
// within the deadline; QueryCoverage also says which shards are missing
// or recovering (pipeline.Coverage.RecoveringWorker maps them to workers).
type PipelineIndex struct {
	index *Index
	node  *Node
	reg   *registration
}

var (
	_ pipeline.CoveringIndex = (*PipelineIndex)(nil)
	_ pipeline.FencedIndex   = (*PipelineIndex)(nil)
)

// StartFeed announces a listener this member starts (Index.StartFeed).
func (p *PipelineIndex) StartFeed(s messages.StreamID) { p.index.StartFeed(s) }

// PID is where the pipeline's coalescers send.
func (p *PipelineIndex) PID() *actor.PID { return p.index.PID() }

// Index is the underlying cluster index handle.
func (p *PipelineIndex) Index() *Index { return p.index }

// Query answers from the shards that answer in time (never an error: a
// shard that does not answer is left out, see QueryCoverage).
func (p *PipelineIndex) Query(q *indexer.QueryRequest, timeout time.Duration) (*indexer.QueryResult, error) {
	res, _, err := p.QueryCoverage(q, timeout)
	return res, err
}

// QueryCoverage asks every shard, waiting at most the index's query
// deadline (Config.QueryDeadline, --route-deadline), or timeout when it is
// shorter.
func (p *PipelineIndex) QueryCoverage(q *indexer.QueryRequest, timeout time.Duration) (*indexer.QueryResult, pipeline.Coverage, error) {
	d := p.index.deadline
	if timeout > 0 && timeout < d {
		d = timeout
	}
	ans := p.index.Query(q, d)
	return &ans.QueryResult, pipeline.Coverage{Shards: p.index.Shards(), Missing: ans.Missing, Recovering: ans.Recovering}, nil
}

// Dump returns replayable events rebuilding the index.
func (p *PipelineIndex) Dump(timeout time.Duration) (*indexer.DumpResult, error) {
	return p.index.Dump(timeout)
}

// Stats returns the counters and sizes over all shards.
func (p *PipelineIndex) Stats(timeout time.Duration) (*indexer.Stats, error) {
	return p.index.Stats(timeout)
}

// Snapshot returns every stream's blocks.
func (p *PipelineIndex) Snapshot(timeout time.Duration) (*indexer.Snapshot, error) {
	return p.index.Snapshot(timeout)
}

// RemoveWorker drops every rank of a worker.
func (p *PipelineIndex) RemoveWorker(w messages.WorkerID) { p.index.RemoveWorker(w) }

// Stop withdraws the pipeline's listeners from rebuilds and stops the
// member's front (the grains live on).
func (p *PipelineIndex) Stop() {
	p.node.unregister(p.reg)
	p.index.Stop()
}
