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
// What the index stores per lineage block, ~30 bytes per (block, worker)
// entry all told when every entry is a lineage block (bench/README.md,
// "Where the memory goes"):
//
//   - 9 bytes in the lineage's lists (its engine hash, its tiers; 0
//     tiers is a dead block waiting for compaction), both in one array
//     (the tiers packed eight to a word after room for the hashes), grown
//     by an eighth rather than append's doubling: ~9.2 bytes.
//   - One 6-byte slot in its stream's owner table (owners.go): an 8-bit
//     tag of the hash's mix, the lineage's id in the stream (20 bits) and
//     the block's absolute position (20 bits), no hash; 7/12 to 7/8 full,
//     ~8.3 bytes.
//     That one table is the stream's owner table (which lineages hold a
//     hash: a Removed event, a store's tiers) and every lineage's hash →
//     position index. A lookup checks a slot whose tag matches against
//     the lineage's list, so the hash is stored once.
//   - Nothing for its parent: a lineage is cut into runs, chains of
//     consecutive positions, and only a run's first block has a parent of
//     its own (a branch) or an anchor (a segment start); a session that
//     keeps continuing its newest block is one run (~1 byte per block).
//     Depth is kept for the newest block only, the one routing asks about,
//     and counted by a walk over the runs to its segment's start only
//     when a store branches, the newest is removed or the lineage is
//     compacted.
//   - Per session and lineage, ~220 bytes (the session's 64-byte record,
//     its slot in the session table and its id, the lineage's 112-byte
//     record, its one run): ~8 bytes per block at the ~28 blocks a
//     conversation's lineage holds in the benchmark. The session table
//     (table.go) is 16-byte slots keyed by a seeded hash of the id, ~26
//     bytes a session, where a Go map of string keys took ~46. The record names its stream, not the stream's key
//     (st.key), counts blocks in 32 bits, keeps its last store's time,
//     like the session, as 8 bytes (an offset from the index's first
//     store, Index.clock) instead of a time.Time's 24, and has one slice
//     header for its hashes and tiers, not two: three size classes of
//     Go's allocator smaller than the 176 bytes it was, and the session
//     one (80 bytes before). A run is 16 bytes: a segment start's negative
//     parent says whether it has an anchor, instead of a bool that padded
//     it to 24.
//
// The obvious alternatives cost more: a Go map from hash to (lineage,
// position) per stream holds the hash again in a 16-byte slot and fills
// to at most 7/8 in groups with control bytes (~24 bytes a block, with
// the 24-byte block record it pointed into: 72 bytes an entry before this
// layout), and a map per lineage beside it another ~30. Keeping only each
// lineage's newest block, with stale owner entries detected by position,
// would save the lists' 9 bytes but not the table, and a Removed event
// needs each block's parent to prune its descendants, which the lists
// give in one forward pass (a parent always precedes its children in
// store order). Dead blocks are dropped off the end at once and compacted
// away when they are half the lineage. Positions in slots are absolute
// (the lineage's base plus the list index, modulo 2^20; a lineage spans
// less than 2^19 — a longer event is trimmed while it is applied — and
// MaxDepth is at most 2^18), so dropping a prefix for MaxDepth rewrites no
// slot; lineage ids fit 20 bits (MaxSessions at most 2^20). A delete
// leaves a tombstone (a slot cannot be moved back without its hash); the
// table is rebuilt from the lineages' lists, sized for the live blocks,
// when live slots and tombstones would pass 7/8.
//
// Against the router's target of 100 bytes of per-block state per (block,
// worker) entry with sessions on, the whole router holds 96.7–99.6 bytes
// in process (bench/README.md, "Where the memory goes"): met at 16 and 64
// workers. The rest is outside this index — the tree's
// node and engine-hash table (~57–59), the coalescer's set of the same
// hashes (~12–13) — and here the per-session records (~8), the lists
// (~9) and the owner slots (~8, a second table of hashes the tree already
// holds per stream, kept because the session actor owns its state).
package sessions
