// Package sessions is the pure core of kvrouter's session lineage index:
// beside the physical index, it records for each (worker, dp_rank) stream
// and session the chain of engine block hashes that session stored there,
// so a follow-up turn can be routed toward the worker that holds the
// session's newest blocks — blocks a prompt-prefix match may not reach yet.
//
// An Index is a plain deterministic value — no actors, no goroutines, no
// clock: Apply feeds it RouterEvents in stream order with the caller's now,
// Holders/Get/Credit answer queries, Forget and Expire drop sessions.
//
// The session actor (actor.go) owns one Index per namespace: it follows the
// index actor (every applied RouterEventBatch, clears then events, with the
// time read at the actor), answers the route path's CreditRequest and the
// operators' GetRequest/ForgetRequest, drops unregistered workers and runs
// Expire on a timer message (ActorConfig.ExpireEvery), not a goroutine per
// session.
//
// # Rules
//
//   - Scope: a lineage belongs to one (session, stream); engine hashes are
//     resolved within the reporting stream (worker, dp_rank). A session's
//     lineage on one stream never
//     resolves parents, claims blocks or gains credit from another stream's
//     events, even under the same session id and engine hash (session ids
//     are unauthenticated producer input). A worker's
//     dp ranks are separate caches, so they are separate streams too.
//   - Unattributed: a Stored event without a session id (or with Dynamo's
//     "__dynamo_unattributed__" stand-in) joins no session. Like every
//     Stored event it adds its tier to blocks lineages already hold on that
//     stream (a physical fact, not an attribution).
//   - Session ids: 1..MaxIDLen bytes of printable ASCII (0x21–0x7E);
//     others are counted invalid_session_id and treated as unattributed.
//   - Store: the chain is appended under its parent when the session's
//     lineage on the stream holds it. A chain without a parent starts a new
//     segment. A chain whose parent the lineage does not hold is counted
//     unknown_parent and also starts a new segment, anchored at that parent
//     hash: the session reused blocks it did not store (a shared system
//     prompt, another session's prefix) or the router missed the store.
//     The segment is kept (it is what the session holds on that worker) but
//     its depth counts only the blocks the session stored.
//   - Duplicate store (a block the lineage holds, under the same parent):
//     the tier is added, nothing moves. Under another parent: counted
//     conflicting_parent; under itself or one of its own descendants
//     (including its segment's anchor): counted cycle. Either ends the
//     event: its remaining blocks are ignored (the blocks before stay).
//   - Removed: every lineage of that stream holding a hash loses the
//     event's tier; a block left on no tier is dropped together with every
//     block of the lineage below it (children are unusable without their
//     prefix), counted pruned. A lineage never points at an evicted block.
//     Not tracked: a segment's anchor block being evicted (the anchor is
//     outside the lineage); engines evict leaves first, so it is rare, and
//     the physical overlap still sees it.
//   - Cleared on (worker, dp_rank) drops every lineage of that stream;
//     DropWorker drops every rank of a worker. Offloaded adds its tier to
//     held blocks.
//   - Newest: the last block appended to a lineage. Depth: the chain from
//     it back to the start of its segment. A session's holders are ordered
//     by their last append (a duplicate store does not reorder them).
//   - Bounds: MaxSessions (LRU by last store; the least recent is evicted,
//     counted evicted), MaxHolders lineages per session (the least recently
//     appended is dropped, holder_dropped), MaxDepth blocks per lineage (the
//     oldest are dropped down to 7/8 of it, depth_dropped; their children
//     start segments anchored at them), MaxBlocks over all sessions (LRU
//     sessions evicted, never the one being stored to), IdleTTL (Expire,
//     also run by Apply: a session with no store for IdleTTL is dropped,
//     expired). A lineage or session left empty is dropped at once.
//   - Event ids are not checked: feed the events the physical index
//     applied, in stream order.
//
// # Routing credit
//
// Credit gives the candidate holding the session's newest lineage a bonus
// of ⌊weight × Depth⌋ blocks; Combine adds it to the physical overlaps
// (effective_overlap = min(overlap + credit, request_blocks)) before
// routing.Router.Decide. The physical overlap stays primary: the credit is
// bounded by what the session stored on that stream, only goes to
// candidates, and sessions with no lineage route as before.
//
// # Cost
//
// Per block: one entry in the lineage's slice (24 bytes, pointer-free: the
// hash, the segment's anchor, the distance to the parent, tiers; depth is
// kept for the newest block only, the one routing asks about, and counted
// by a walk to its segment's start only when a store branches, the newest
// is removed or the lineage is compacted) and one in its stream's owner map: engine hash → a ref (the lineage's id in
// the stream and the block's position in it, 8 bytes, no pointer), other
// holders of the same hash in a side map that is nearly always empty. That
// one map is both the stream's owner table and every lineage's
// hash → position index (a per-lineage map cost ~30 B per block more).
// Removed events find the lineages holding a hash through the owner map
// and prune each with one forward pass from the lowest removed position (a
// parent always precedes its children in store order); dead blocks are
// dropped off the end at once and compacted away when they are half the
// lineage. Positions in refs are absolute (the lineage's base plus the
// slice index), so dropping a prefix for MaxDepth rewrites no ref.
package sessions
