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
//
// # The route path's lookup
//
// A route costs one message and one goroutine hand-off per shard: Query
// sends each shard a copy of the request carrying one buffered channel
// (package reply) with room for every shard's answer, and waits on it
// under one pooled timer. The shard actors still answer route requests —
// the tree stays owned by its actor and is never read from another
// goroutine. What went is the protoactor future per shard: a registry
// entry under a fresh name, a time.AfterFunc and a sync.Cond each
// (bench/README.md, "Index and routing", has the before and after). A
// channel is an in-process value, so the cluster's shard grains, asked
// across hosts, keep futures. The hand-off wakes a parked worker
// goroutine (mailbox.Dispatcher), not a fresh goroutine per mailbox run whose
// stack then grows to the tree walk's depth. Lookups batch by themselves: queries that
// arrive while a shard applies a batch wait in its priority mailbox and
// are answered in the same mailbox run, ahead of the batches.
//
// Two other shapes were weighed and not taken. Reading a shard's
// published immutable state from the caller's goroutine would remove the
// hand-off too, but the radix tree is updated in place; publishing an
// immutable version per batch needs a persistent (copy-on-write) tree,
// which costs the ingest path an allocation per touched node and the
// memory budget a second version while readers hold the old one. Running
// the shard mailboxes on the synchronized dispatcher (as the route actor
// does) would let a route that finds its shard idle answer on its own
// goroutine, but whoever starts a mailbox run keeps handling what queues
// meanwhile: the route caller would apply ingest batches before it
// returns, and the front would apply every shard's batches on its own
// goroutine, serializing the shards.
package indexer
