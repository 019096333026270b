package indexer

import (
	"cmp"
	"maps"
	"slices"

	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// The shards hold disjoint sets of streams, so their answers merge without
// loss. These functions are pure; Index calls them on the shards' replies.

// mergeQuery merges the shards' answers to one query: scores are disjoint
// and each part is deepest first, so a k-way merge keeps the order;
// frequencies (streams holding blocks 0..i) add.
func mergeQuery(parts []*QueryResult) *QueryResult {
	if len(parts) == 1 {
		return parts[0]
	}
	n, depth := 0, 0
	for _, p := range parts {
		n += len(p.Scores)
		depth = max(depth, len(p.Frequencies))
	}
	out := &QueryResult{Scores: make([]radix.Score, 0, n)}
	if depth > 0 {
		out.Frequencies = make([]uint32, depth)
	}
	next := make([]int, len(parts))
	for len(out.Scores) < n {
		best := -1
		for i, p := range parts {
			if next[i] < len(p.Scores) && (best < 0 || p.Scores[next[i]].Blocks > parts[best].Scores[next[best]].Blocks) {
				best = i
			}
		}
		out.Scores = append(out.Scores, parts[best].Scores[next[best]])
		next[best]++
	}
	for _, p := range parts {
		for i, f := range p.Frequencies {
			out.Frequencies[i] += f
		}
	}
	return out
}

// mergeStats sums the shards' counters and sizes, unites their per-stream
// tree sizes and keeps each shard's own size.
func mergeStats(parts []*Stats) *Stats {
	out := &Stats{TreeSizes: map[messages.WorkerKey]int{}, Shards: make([]radix.Size, len(parts)), ShardStoredBlocks: make([]uint64, len(parts))}
	for i, p := range parts {
		out.Tree = addStats(out.Tree, p.Tree)
		out.StoredBlocks += p.StoredBlocks
		out.ShardStoredBlocks[i] = p.StoredBlocks
		out.Size = addSize(out.Size, p.Size)
		out.Shards[i] = p.Size
		maps.Copy(out.TreeSizes, p.TreeSizes)
	}
	return out
}

// mergeSnapshots unites the shards' blocks per stream and sums their
// counters.
func mergeSnapshots(parts []*Snapshot) *Snapshot {
	out := &Snapshot{Blocks: map[messages.WorkerKey][]messages.ExternalHash{}}
	for _, p := range parts {
		maps.Copy(out.Blocks, p.Blocks)
		out.Stats = addStats(out.Stats, p.Stats)
		out.Size = addSize(out.Size, p.Size)
	}
	return out
}

// mergeDumps concatenates the shards' dumps: each is a list of whole
// streams, and streams never span shards, so the result replays as is.
func mergeDumps(parts []*DumpResult) *DumpResult {
	out := &DumpResult{}
	for _, p := range parts {
		out.Events = append(out.Events, p.Events...)
		out.Positions = append(out.Positions, p.Positions...)
	}
	slices.SortFunc(out.Positions, func(a, b messages.Position) int {
		return cmp.Or(cmp.Compare(a.Stream.Worker, b.Stream.Worker), cmp.Compare(a.Stream.DpRank, b.Stream.DpRank))
	})
	return out
}

func addStats(a, b radix.Stats) radix.Stats {
	a.Events += b.Events
	for i := range a.Counts {
		a.Counts[i] += b.Counts[i]
	}
	return a
}

func addSize(a, b radix.Size) radix.Size {
	return radix.Size{Blocks: a.Blocks + b.Blocks, Entries: a.Entries + b.Entries,
		Detached: a.Detached + b.Detached, Streams: a.Streams + b.Streams}
}
