// Package indexer holds a namespace's prefix index as shard actors, each
// owning a radix.Tree (package radix) for a slice of the workers.
//
// Sharding is by worker (README.md beside this file, "Sharding"): every
// (worker, dp_rank) stream lives on shard Jump(worker, N), so a worker's
// events are applied by one actor in the order its coalescers emitted them,
// and each shard's answers are exact for its workers. A query fans out to
// every shard and the answers merge without loss: scores are disjoint
// (one per stream), frequencies add, sizes add.
//
//	coalescers ─▶ front (dispatch by worker) ─▶ shard i: radix.Tree
//	                 └─▶ followers (publisher, session index), in order
//	Index.Query ─▶ every shard, concurrently ─▶ merge (pure, merge.go)
//
// Index is the handle the pipeline keeps: its PID receives the coalescers'
// RouterEventBatches; its methods ask the shards and merge the answers.
package indexer
