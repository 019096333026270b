package indexer

import (
	"testing"

	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

func score(w messages.WorkerID, blocks uint32) radix.Score {
	return radix.Score{Key: messages.WorkerKey{Worker: w}, Blocks: blocks}
}

func TestMergeQueryKeepsDeepestFirstAndAddsFrequencies(t *testing.T) {
	parts := []*QueryResult{
		{Scores: []radix.Score{score(1, 5), score(2, 2), score(3, 1)}, Frequencies: []uint32{3, 2, 1, 1, 1}},
		{},
		{Scores: []radix.Score{score(7, 4), score(8, 2)}, Frequencies: []uint32{2, 2, 1, 1}},
	}
	got := mergeQuery(parts)
	want := []radix.Score{score(1, 5), score(7, 4), score(2, 2), score(8, 2), score(3, 1)}
	if len(got.Scores) != len(want) {
		t.Fatalf("scores %v, want %v", got.Scores, want)
	}
	for i := range want {
		if got.Scores[i] != want[i] {
			t.Fatalf("score %d = %v, want %v (all %v)", i, got.Scores[i], want[i], got.Scores)
		}
	}
	wantF := []uint32{5, 4, 2, 2, 1}
	for i, f := range wantF {
		if got.Frequencies[i] != f {
			t.Fatalf("frequencies %v, want %v", got.Frequencies, wantF)
		}
	}
}

func TestMergeQueryEmptyAndSingle(t *testing.T) {
	one := &QueryResult{Scores: []radix.Score{score(1, 1)}}
	if mergeQuery([]*QueryResult{one}) != one {
		t.Fatal("one shard's answer is returned as is")
	}
	got := mergeQuery([]*QueryResult{{}, {}})
	if len(got.Scores) != 0 || got.Frequencies != nil {
		t.Fatalf("empty merge = %+v", got)
	}
}

func TestMergeStatsSumsAndKeepsShards(t *testing.T) {
	a := &Stats{Tree: radix.Stats{Events: 3}, Size: radix.Size{Blocks: 4, Entries: 5, Streams: 1},
		TreeSizes: map[messages.WorkerKey]int{{Worker: 1}: 5}}
	b := &Stats{Tree: radix.Stats{Events: 2}, Size: radix.Size{Blocks: 1, Entries: 2, Detached: 1, Streams: 2},
		TreeSizes: map[messages.WorkerKey]int{{Worker: 2}: 1, {Worker: 3}: 1}}
	a.Tree.Counts[0], b.Tree.Counts[0] = 7, 1
	got := mergeStats([]*Stats{a, b})
	if got.Tree.Events != 5 || got.Tree.Counts[0] != 8 {
		t.Fatalf("counters %+v", got.Tree)
	}
	if got.Size != (radix.Size{Blocks: 5, Entries: 7, Detached: 1, Streams: 3}) {
		t.Fatalf("size %+v", got.Size)
	}
	if len(got.TreeSizes) != 3 || got.TreeSizes[messages.WorkerKey{Worker: 1}] != 5 {
		t.Fatalf("tree sizes %v", got.TreeSizes)
	}
	if len(got.Shards) != 2 || got.Shards[1] != b.Size {
		t.Fatalf("per-shard sizes %v", got.Shards)
	}
}

func TestShardOfIsStableBalancedAndConsistent(t *testing.T) {
	const workers = 4000
	for _, n := range []int{0, 1} {
		if s := ShardOf(12345, n); s != 0 {
			t.Fatalf("ShardOf(_, %d) = %d", n, s)
		}
	}
	for n := 2; n <= 8; n++ {
		count := make([]int, n)
		for w := range messages.WorkerID(workers) {
			s := ShardOf(w, n)
			if s < 0 || s >= n {
				t.Fatalf("ShardOf(%d, %d) = %d out of range", w, n, s)
			}
			if ShardOf(w, n) != s {
				t.Fatal("not deterministic")
			}
			count[s]++
			// Growing from n to n+1 shards moves a worker only to the new
			// shard (jump hash's consistency).
			if s2 := ShardOf(w, n+1); s2 != s && s2 != n {
				t.Fatalf("worker %d moved from shard %d to %d going to %d shards", w, s, s2, n+1)
			}
		}
		fair := workers / n
		for s, c := range count {
			if c < fair*8/10 || c > fair*12/10 {
				t.Fatalf("%d shards: shard %d has %d workers, fair share %d (%v)", n, s, c, fair, count)
			}
		}
	}
}
