package indexer

import (
	"maps"
	"slices"

	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// Shard is one shard's state as a plain value: the radix.Tree of the
// streams placed on it, and one method per shard message. An actor that
// owns a Shard (the local shard actor, the cluster's shard grain) feeds it
// messages in arrival order and sends back what it returns. Not safe for
// concurrent use.
type Shard struct {
	tree    *radix.Tree
	overlap radix.Overlap
	// pos is each stream's position: the last engine batch applied.
	pos map[messages.StreamID]messages.Position
	// stored counts the blocks of the stored events applied.
	stored uint64
}

// NewShard returns an empty shard.
func NewShard() *Shard {
	return &Shard{tree: radix.New(radix.Config{}), pos: map[messages.StreamID]messages.Position{}}
}

// Apply applies one stream's batch: its clears first, then its events;
// then it records the stream's position (or forgets it after a clear that
// carries none).
func (s *Shard) Apply(b *messages.RouterEventBatch) {
	for _, k := range b.Clear {
		s.tree.Reset(k)
	}
	for _, ev := range b.Events {
		s.tree.Apply(ev)
		if ev.Event.Kind == messages.KindStored {
			s.stored += uint64(len(ev.Event.Blocks))
		}
	}
	switch p := b.Position; {
	case p.Known:
		s.pos[p.Stream] = p
	case len(b.Clear) > 0:
		delete(s.pos, p.Stream)
	}
}

// Query answers a query; the answer owns its slices.
func (s *Shard) Query(q *QueryRequest) *QueryResult {
	o := s.tree.FindMatches(q.Hashes, q.Options, &s.overlap)
	return &QueryResult{
		Scores:      append([]radix.Score(nil), o.Scores...),
		Frequencies: append([]uint32(nil), o.Frequencies...),
	}
}

// RemoveWorker drops every rank of a worker.
func (s *Shard) RemoveWorker(w messages.WorkerID) {
	s.tree.RemoveWorker(w)
	maps.DeleteFunc(s.pos, func(k messages.StreamID, _ messages.Position) bool { return k.Worker == w })
}

// Dump returns replayable events rebuilding the shard and its streams'
// positions.
func (s *Shard) Dump() *DumpResult {
	return &DumpResult{Events: s.tree.Dump(), Positions: slices.Collect(maps.Values(s.pos))}
}

// Stats returns the shard's counters, size and per-stream tree sizes.
func (s *Shard) Stats() *Stats {
	st := &Stats{Tree: s.tree.Stats(), Size: s.tree.Size(), TreeSizes: map[messages.WorkerKey]int{},
		StoredBlocks: s.stored, ShardStoredBlocks: []uint64{s.stored}}
	for _, k := range s.tree.Workers() {
		st.TreeSizes[k] = s.tree.TreeSize(k)
	}
	return st
}

// Snapshot returns every stream's blocks.
func (s *Shard) Snapshot() *Snapshot {
	snap := &Snapshot{Blocks: map[messages.WorkerKey][]messages.ExternalHash{}, Stats: s.tree.Stats(), Size: s.tree.Size()}
	for _, k := range s.tree.Workers() {
		snap.Blocks[k] = s.tree.Blocks(k)
	}
	return snap
}

// MergeQuery merges answers from shards holding disjoint streams (the
// rules of Index.Query): scores k-way merged deepest first, frequencies
// added.
func MergeQuery(parts []*QueryResult) *QueryResult { return mergeQuery(parts) }

// MergeStats sums shards' stats, keeping each shard's size in order.
func MergeStats(parts []*Stats) *Stats { return mergeStats(parts) }

// MergeSnapshots unites shards' snapshots.
func MergeSnapshots(parts []*Snapshot) *Snapshot { return mergeSnapshots(parts) }

// MergeDumps concatenates shards' dumps.
func MergeDumps(parts []*DumpResult) *DumpResult { return mergeDumps(parts) }

// BatchWorker is the worker a batch belongs to (one stream's coalescers
// emit it, so every event and clear names the same worker): ShardOf of it
// places the batch.
func BatchWorker(b *messages.RouterEventBatch) messages.WorkerID { return batchWorker(b) }
