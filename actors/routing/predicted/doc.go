// Package predicted holds the blocks the router expects a worker to hold
// because it just routed a request there: predict-on-route. A Table is
// a side structure beside the event-driven index (actors/indexer/radix),
// owned by the route actor, which decides, books and predicts in one
// step.
//
// # Why
//
// An engine publishes BlockStored only once it has computed the blocks.
// For a prefill of a few thousand tokens that takes hundreds of
// milliseconds (chunked prefill stores them step by step), and the
// requests that share the prefix keep arriving meanwhile: sibling
// samples of one prompt (RL rollouts, best-of-N), an agent's fan-out over
// one context, a popular system prompt after a deploy. Routed from the
// event-driven index alone, each sibling sees no worker holding the
// prefix and the load term spreads them, so the prefix is prefilled on
// many workers. A prediction makes the first sibling's worker hold the
// prefix at once.
//
// # Rules
//
//   - Record: when a request is routed to a (worker, dp_rank), its block
//     hashes (the router's local hashes, as the route request hashed them)
//     are predicted there, each with the TTL of the worker's mode; a block
//     already predicted is refreshed (TTL and LRU position).
//   - Score: a candidate's overlap is the larger of its event-confirmed
//     overlap (the index) and its predicted overlap (contiguous predicted
//     blocks from block 0). The route answer says how many of the chosen
//     worker's blocks came from the prediction beyond the confirmed ones.
//   - BlockStored of a predicted block (same local hash, same stream)
//     confirms it: the prediction stays until its TTL, remembering the
//     engine's hash, so a chain stored part by part still scores whole.
//   - BlockRemoved of a confirmed block kills its prediction at once;
//     AllBlocksCleared (or the router clearing the stream) kills every
//     prediction of the stream; unregistering kills the worker's.
//   - Waiting: a block 0 predicted on an event-publishing worker counts
//     the requests routed there with it since an event last confirmed it
//     (Overlap.Waiting; 0 from its BlockStored on). Those requests'
//     prefills are queued or running there and the predicted blocks are a
//     hit only once they have run; the router credits such blocks less
//     the more requests wait (actors/routing, wait.go). An event-less
//     worker's count stays 0: nothing would ever confirm it.
//   - The TTL expires the rest: a prediction the engine never confirmed
//     (another hash scheme, a failed request) stops counting.
//   - Predictions never enter the event-driven tree: the engine's hash
//     inputs (salts, multimodal digests, extra keys) can make its blocks
//     differ from the router's hashes, and a predicted block the engine
//     does not hold must never look like an exact one. /query, /dump and
//     the published router events show the index only.
//   - Bounded memory: the predictions of event-publishing workers share one
//     cap (Config.MaxBlocks) and one LRU list; an event-less worker has its
//     own list of its registered capacity. A full list evicts its least
//     recently routed block, counted. Blocks of one request are recorded
//     last block first, so the LRU drops a prompt's tail before the prefix
//     other prompts share; a request longer than a list keeps its prefix.
//
// # Event-less workers
//
// A worker registered without an event endpoint (or with events "none")
// publishes nothing: the Table is all the router knows of its cache, an
// approximate per-worker cache fed by the router's own decisions, sized by
// the registration's cache_blocks (its engine's num_gpu_blocks when the
// operator knows it; DefaultEventLessBlocks otherwise), LRU-evicted, with
// a longer TTL (Config.EventLessTTL, default 120 s). Such a worker never
// appears holding a block the router did not route there. Fleets may mix
// both modes.
//
// # Defaults
//
// TTL 2 s: the bench's engine model prefills 10,000 tokens/s per worker,
// so an uncached prompt of 20,000 tokens (longer than nearly all of the
// replayed traces' prompts) is stored within 2 s plus one publish
// interval; past that a prediction the engine never confirmed is more
// likely wrong (a different hash scheme, a failed request) than slow. A
// confirmed block is still scored by the index after its prediction
// expires. Cap 2^18 blocks (about 120 bytes each: 30 MB): at the TTL,
// 131,072 new blocks a second. Event-less TTL 120 s and capacity 16,384
// blocks (256 k tokens at block size 16) unless registered.
//
// # What the references do
//
// Dynamo's router keeps an optional predict-on-route side index
// (`router_predicted_ttl_secs`, off by default), fed only by routing
// decisions and pruned by TTL; events go to the primary index only, and
// a query takes each worker's larger overlap of the two. Its mode without
// events is the same approximate index as the primary one (TTL 120 s, at
// most 2^20 blocks, pruned to 80 %). llm-d's precise prefix scorer has
// speculative indexing (`speculativeIndexing`, off by default, TTL 2 s):
// after a decision it adds the request's blocks to its main index as
// speculative pod entries and removes them when their TTL ends. Here
// events also confirm and kill predictions (neither reference lets a
// BlockRemoved end one early), predictions stay out of the index as in
// Dynamo, and they are on by default.
//
// # Why not the obvious alternatives
//
//   - A prediction actor beside the route actor: siblings arrive
//     concurrently, and a lookup made before the previous sibling's
//     prediction is recorded would miss it — the decision and the
//     prediction must be one step, like booking load, so the route actor
//     owns the Table.
//   - Writing predictions into the radix tree (llm-d's way): the tree's
//     guarantee (never a block the engine evicted) would be lost, and with
//     different hash schemes the same block would be keyed twice.
//
// # Several router hosts
//
// Each host's route actors own their Tables; a cluster shares the
// predictions as it shares booked load: the service pushes each booked
// decision's hashes, worker and carried overlap to the other members,
// whose route actors Record them as their own (routing.RemotePrediction;
// actors/service, cluster_load.go). A push can be lost (fire and forget): a
// sibling another host routes then misses the prediction, as it would
// without sharing; it is never wrong for longer than the TTL. An
// event-less worker's approximate cache is replicated the same way: each
// host's Table holds a copy fed by its own decisions and the pushes, not
// one copy on an owner host, because a decision reads the cache in the
// step that books it (an owner would add a round trip per route). Copies
// can differ by lost pushes and by a host's start time; each is bounded
// by the worker's capacity and the event-less TTL.
package predicted
