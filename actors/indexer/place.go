package indexer

import "github.com/kvrouter/kvrouter/messages"

// ShardOf returns the shard, in [0, shards), holding a worker's streams:
// Lamping and Veach's jump consistent hash of the worker id, so going from
// N to N+1 shards moves only 1/(N+1) of the workers (what a cluster adding
// a host wants), and every host computes the same placement without a
// table. shards ≤ 1 → 0.
func ShardOf(w messages.WorkerID, shards int) int {
	if shards <= 1 {
		return 0
	}
	key := uint64(w)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019 // spread small, dense ids
	b, j := int64(-1), int64(0)
	for j < int64(shards) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}
