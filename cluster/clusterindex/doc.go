// Package clusterindex spreads a namespace's prefix index over a
// protoactor cluster: shard grains (kind "kvrouter-shard", identity
// "<namespace>/<shard>") each own an indexer.Shard, placed on members by
// rendezvous hashing of the identity, and Index, the handle every member
// keeps, sends batches to the shard of their worker (indexer.ShardOf) and
// fans queries out to every shard grain with a deadline.
//
//	coalescers ─▶ front (this member; per-shard FIFO) ─▶ shard grain on its owner
//	Index.Query ─▶ every shard grain, concurrently, until the deadline ─▶ merge
//
// Answers are never silently wrong: a shard that does not answer in time
// is listed Missing, one whose slice is rebuilding (a fresh activation
// after its host left, until seeded) is listed Recovering. See
// cluster/README.md, "Design".
package clusterindex
