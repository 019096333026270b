// Package coalescer is the pure core of the session coalescer: it turns the
// PlacementEvents of one (worker, dp_rank) stream into RouterEvents with dense
// event ids, merging consecutive events that the index may apply as one
// (the rules below; the index's side of event ids is in
// actors/indexer/README.md, "Event ids").
//
// A Stream is a plain deterministic value: no goroutines, no clock, no I/O.
// Push feeds it one event in engine order and appends what must be emitted
// now; Flush emits the pending event. The actor that owns a Stream calls
// Flush on its timer, at the end of every engine batch and on shutdown.
//
// # Rules
//
//   - At most one event is pending. A new event merges into it only if it has
//     the same tier (worker and dp_rank are the stream's), the same session
//     ("" and "" are the same) and compatible data: Stored whose parent is the
//     pending Stored's last block (chain continuation), or Removed after
//     Removed. Anything else flushes the pending event first, so a stream's
//     events leave in engine order and sessions never mix.
//   - Cleared is a barrier: the pending event is flushed, the clear is
//     emitted alone, and the reference counts are reset.
//   - MaxBlocks (default 128) bounds the blocks, or removed hashes, of every
//     emitted event. A merge that would pass it flushes the pending event
//     first; a pending event that reaches it is flushed at once.
//   - Event ids are dense per stream starting at 1, one per emitted event.
//     Inputs that emit nothing (see below) consume no id.
//   - Duplicate stores are reference counted per (tier, engine hash): a
//     hash's remove passes only when its count drops to zero, and a Removed
//     left with no hash is dropped. A remove of a hash the stream never saw
//     stored passes (the router may have started after the engine; the index
//     counts unknown hashes).
//
// # Decisions beyond the reference
//
//   - Over-cap events are split. The reference emits an event larger than
//     the cap whole; here a Stored of n > MaxBlocks blocks leaves as
//     MaxBlocks-sized pieces, each piece after the first parented on the
//     previous piece's last block (the same chain, so the index ends in the
//     same state), and a Removed is cut the same way. The remainder of a
//     split is pending like any event, so a continuation may still merge
//     into it. MaxBlocks is therefore a hard bound consumers can rely on
//     (message size, work per index update). Events of at most MaxBlocks are
//     never split.
//   - Reference counts are per (tier, engine hash), not per hash: an
//     engine that offloads a block to host memory emits a second Stored of
//     the same hash on another tier, and the device copy's later remove must
//     still reach the index.
//   - Cleared resets the counts of every tier: the index drops everything of
//     the (worker, dp_rank) on a clear.
//   - Inputs that emit nothing (an empty Stored or Removed, a Removed whose
//     hashes are all still referenced, an event of another stream or of an
//     unknown kind) are invisible: they neither flush nor split the pending
//     event. They are counted in Stats.
//   - Push copies what it keeps (it never retains the caller's slices) and
//     every emitted event owns its slices: nothing emitted aliases a buffer
//     the Stream later appends to.
//
// # Sessions are states, not actors
//
// The order rule makes the sessions of one stream strictly sequential: an
// event of session B may only leave after session A's pending event. A
// coalescer per session would therefore need a round trip to the stream's
// owner for every event, only to find out it must flush. So a session's
// coalescing state is simply the pending event's session inside the one
// per-stream value, and idle session state is dropped: once a session's
// event is emitted nothing of the session is remembered. There are no
// per-session records, so no session count to bound; session ids (untrusted,
// engine-supplied) are only carried through, and their length is bounded by
// the decoder (wire.Limits).
//
// # Memory
//
// Between engine batches a Stream holds no event data: its ~380-byte
// record (counters included) and the reference-count table. The pending
// event's data (at most MaxBlocks blocks or hashes) is in buffers of its
// own that leave with it as the emitted event's slices, so emitting it
// copies nothing, and the owner's Flush at the end of every batch leaves
// the Stream without any. A buffer starts at its first input's size, or,
// while the stream's pending events take merges, at the largest size they
// reached (merges seldom regrow one step by step: one allocation per
// emitted event, as a copy at emission took), and doubles up to MaxBlocks;
// an event that takes no merge leaves at its own size, one cut short by a
// Flush with up to MaxBlocks of room (for as long as the index and its
// followers take to apply it). A remove that loses no hash to the counts is passed on
// without a copy; only a stream whose removes were filtered keeps a
// scratch buffer (at most 4,096 hashes). Preallocated, the buffers cost
// every stream that ever stored 2 KiB (MaxBlocks × 16 bytes), 1 KiB more
// once it removed: ~2.6 bytes per (block, worker) entry at the ~790
// entries per stream of the in-process memory test at 64 workers, nothing
// at an engine's 10^5–10^6 blocks, but a router of many small streams
// (many workers or dp ranks, small caches) pays them.
//
// The reference-count table has one entry per engine hash stored and not
// yet removed, so it grows with the engine's cache only and is freed on
// Cleared. A hash stored once on the device tier (nearly all of them) is
// a slot of an 8-byte-slot set (actors/internal/hashtab: 7/16 to 7/8
// full), ~13 bytes a hash; any other is a Go map entry holding the counts
// of the four tiers packed in one word, ~24 bytes (refs.go; the map is
// made by the first such hash). Because
// engines are untrusted (one that never removes would grow it forever) the
// table is capped by MaxTrackedBlocks (default 2^20 hashes per stream,
// roughly 25 MB in the worst case). Past the cap, new hashes are not counted
// (Stats.Untracked) and their removes pass through, which can only drop a
// block the engine still holds in a duplicate (a lost hit), never keep one
// it evicted.
//
// # Why the counts are here and not in the index
//
// The index tree keeps its own engine hash → block map per stream, so the
// table duplicates a set the tree holds. Counting duplicates in the tree
// instead (a side count only for hashes stored twice) would save the
// table, but the counts' answers are needed before any shard applies the
// batch: the index's front hands each batch to its shard and, at the same
// time, to the followers — the session index, which prunes a lineage on a
// remove, and the router-event publisher, whose consumers apply removes
// as they come — and, in a cluster, the shard is a grain on another host
// while the followers stay on this one. A remove filtered only in the tree
// would reach the followers unfiltered (a lineage and a consumer's index
// losing a block the engine still holds), and the unknown-parent check
// that marks a stream degraded would need an answer back from the shard.
// Moving the counts would mean feeding followers from the shards and
// answering the stream actor from them; until then the table stays, made
// small (above).
package coalescer
