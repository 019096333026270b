// Package radix is the pure core of kvrouter's index
// (actors/indexer/README.md, "Index rules"): a radix tree of local block hashes recording which (worker, dp_rank)
// streams hold each block, on which storage tiers. It has no actors, no
// goroutines and no clock: Apply feeds it RouterEvents in stream order,
// FindMatches answers overlap queries. The shard actors own Trees.
//
// # Rules
//
//   - Store: each block is attached under the block its parent engine hash
//     names in the stream's lookup (the root without parent). A block the
//     stream already holds under that engine hash keeps its place and gains
//     the event's tier (duplicate stores, offload to another tier).
//   - Unknown parent: the chain is kept as a detached chain (below).
//   - Remove: the event's tier is dropped from the block; a block left on no
//     tier is dropped for that stream together with every block below it
//     that the stream holds (children cannot be used without their prefix).
//     Other streams keep theirs. A hash the stream does not hold is a
//     counted no-op, and so is a tier it does not hold the block on.
//   - Cleared drops everything of that (worker, dp_rank), on every tier, and
//     keeps its event-id position; Reset also forgets the position;
//     RemoveWorker resets every rank of a worker.
//   - Event ids per stream: last+1 applies, ≤ last is stale (ignored),
//     > last+1 applies and counts a gap; 0 is unsequenced (dumps).
//   - Every outcome is a closed-set Reason, counted in Stats.
//
// # Detached chains (the cold-start problem)
//
// A router started late, or after a resync, never sees the stores of the
// roots engines already hold, so their continuations arrive with a parent
// the stream does not hold. The reference drops them (parent_not_found).
// Here they are kept, but never matched while detached: a query matches
// contiguously from block 0 of the root, and a detached chain's first block
// sits at an unknown depth k ≥ 1 below blocks the router never saw. Local
// hashes are per block (not chained), so matching it as a root-level subtree
// would report a hit whenever the query's block 0 merely has the same
// tokens as that deeper block — a phantom hit. And the chain cannot be
// hung under any tree block either: if the stream held its parent, the
// lookup would have found it. So the honest rule is: detached blocks are
// held (Blocks, TreeSize, removes, clears, placeholders and Dump see them)
// and are grafted into the tree, with everything stored below them, as soon
// as the stream stores their parent — an engine that evicted a prefix and
// recomputes it re-emits exactly that store, after which the old tail is a
// hit again. Counted: parent_not_found (a new detached chain),
// detached_parent (a chain continuing one), grafted (blocks attached).
//
// # Tiers
//
// Each (block, stream) entry has a tier bit set (device, host, disk,
// external); it is held while any bit is set. A block held on host whose
// children are on device still counts as a prefix: an offloading engine
// loads it back. Score.Tiers splits a match by the fastest tier holding
// each block. Offload events without tokens (vLLM's CPU placeholders,
// rejected by the normalizer as no_tokens) are applied with
// ApplyPlaceholder: a block the stream already holds under that engine hash
// gains the tier; others are counted as unresolved.
//
// # Layout
//
// Nodes live in an arena of 32-byte pointer-free structs linked by uint32
// indices (the garbage collector does not scan it), in fixed chunks of 1,024
// nodes: growing it copies nothing and leaves at most one chunk unused (a
// slice grown by append copied every node at each growth, ~30 % of a
// from-empty apply's CPU, and kept up to a quarter of its length spare).
// Freed nodes are reused before the arena grows. A node keeps its
// only child inline, ≥ 2 children in sorted slices, > 32 in a map. Streams
// are interned as small ids; a node holding one stream stores its entry
// (id<<4 | tier bits) inline, a few streams in a sorted []uint32, many in
// per-tier bitsets indexed by id (when the bitset is no larger than the
// list). Because a stream never holds a block without its prefix, the
// holders of query block i are a subset of those of block i-1, and
// FindMatches scores each stream at the deepest matched block holding it,
// processing bitsets a word at a time.
//
// Each stream's lookup maps engine hash → node and the node's generation
// (an actors/internal/hashtab.Map: one probe, one cache line; store touches
// an event's slots before resolving its blocks, so their cache misses
// overlap).
// A cascade does not know the engine hashes of the descendants it drops, so
// their entries go stale; a lookup validates (generation, membership) and
// deletes what it finds stale, and a sweep runs when stale entries could
// be half the table.
//
// Aliases: if a stream stores a second engine hash for a tree block it
// already holds (same local-hash path), both hashes name the block and a
// remove of either drops it. That can lose a hit, never keep a phantom
// block. Real engines chain their hashes, so this needs hand-made input or
// a hash scheme kvrouter's local hashes do not capture.
package radix
