// Package routing is the pure core of kvrouter's routing decision: the cost
// function over the candidate (worker, dp_rank)s (# Cost below: kvrouter's
// default, and the reference router's formula as Config.Cost CostDynamo)
// and the per-rank load bookkeeping that feeds it (# Load).
//
// A Router is a plain deterministic value — no goroutines, no clock, no I/O.
// The route actor owns one, asks the index for the request's overlaps, calls
// Route (or Decide, then Load().Add), and forwards prefill_done and free to
// Load. Every method that needs the time takes it as an argument: the
// route actor passes its clock's (Config.Now, the wall clock unless one
// is injected, as the bench's replay on a modelled clock does). With
// PredictingProps the route actor also owns a predicted.Table (predict.go,
// package predicted): each request's predicted overlaps join its
// overlaps (the larger per candidate counts), and the chosen worker gets
// the request's blocks predicted. A predicted overlap still to be prefilled
// by requests routed there earlier earns no credit when an idle candidate
// prefilling the whole request would reach the first token sooner by more
// than the recompute's share of the idle candidates
// (Config.PredictedWaitCheck, on by default), and less credit the more of
// them wait and the more candidates are idle with
// Config.PredictedWaitFalloff (off by default; both wait.go): a large
// fleet spreads a burst over its idle workers rather than queue it behind
// one prefill, a busy one keeps it together.
//
// # Cost
//
// For each candidate (worker, dp_rank), with its overlap o (matched blocks
// from block 0; 0 when the index reports none), block size bs, the
// request's input length isl in tokens, and n the requests the rank
// tracks (in prefill or decode, plus Candidate.Remote.Requests):
//
//	cached_tokens  = min(o × bs, isl)
//	cached_blocks  = cached_tokens / bs                         (float)
//	new_blocks     = (isl − cached_tokens) / bs                 (float)
//	queued_blocks  = active_prefill_tokens / bs                 (float)
//	prefill_blocks = queued_blocks + new_blocks
//	r              = (n + 1) / (mean n over the candidates + 1)
//	busy           = k / (1 + k), k = cache_falloff × (r − 1)²  (0 when r ≤ 1)
//
//	CostKVRouter (the default):  logit = overlap_weight × (new_blocks + busy × cached_blocks)
//	                                     + queued_blocks + decode_blocks
//	CostDynamo (the reference):  logit = overlap_weight × prefill_blocks + decode_blocks
//
// Lower is better. A candidate's cached blocks save it overlap_weight
// each, times 1 − busy = 1 / (1 + cache_falloff × (r − 1)²): the full
// saving up to the candidates' mean request count, half of it at
// r = 2 (falloff 1), a tenth at r = 4. The cap at isl only matters for an
// overlap longer than the request (bad input); otherwise CostDynamo is the
// reference's formula exactly (it ignores the falloff). Defaults:
// CostKVRouter, weight 16 (DefaultOverlapWeight), cache falloff 1
// (DefaultCacheFalloff), temperature 0; DynamoConfig is the reference's,
// weight 1, no falloff. `kvrouter serve --cost dynamo` selects it,
// `--cache-falloff 0` turns the falloff off. On a cluster n counts the
// requests every host routed and still tracks (the others' arrive as
// Candidate.Remote.Requests with their shared load), so r is the fleet's
// spread, not one host's. Degraded candidates are scored
// the same way with the overlap the index reports; the Decision says
// whether the chosen one is degraded and how many candidates were.
//
// # Why this default
//
// Measured with kvrouter-bench's engine model (bench/README.md, "Peers'
// policies and the default"): prefill is booked on a worker until its
// engine reports it done, so the queued prefill is real, often large,
// load. The reference's cost multiplies it by the overlap weight together
// with the request's own uncached blocks: at weight 1 a worker with the
// conversation cached but a prefill queued loses to an empty one (56–76 %
// of the clairvoyant hit rate on the Mooncake traces at 4–64 workers);
// raising the weight raises the queue's weight as well (79–89 %).
// Weighting only what the choice changes — the uncached blocks this
// request would prefill there — and counting queued prefill and decode
// blocks once as load keeps a conversation on its worker unless that
// worker is really busier.
//
// How strongly to keep it is where the workloads disagree. The Mooncake
// conversations gain from a higher weight (on their first 2,000 requests
// at 16 workers, a fixed weight 8: 94 % of the bound, 16: 98 %, 32: 99 %,
// all at request CoV ≤ 0.06); on the generated agentic workload
// a higher weight keeps every session of a Zipf-popular tenant on the few
// workers holding its system prompt (request CoV 0.24 at weight 8, 0.39
// at 16, 0.54 at 32, the same subset), and a lower one (4) balances it but
// costs the conversations 7 points. The falloff separates the two: a
// worker only loses its cache's pull once it runs well above the
// candidates' mean request count — which the conversations, spread by
// nature, rarely reach and a hot tenant's workers do — so the weight can
// be high for the common case. Weight 16 with falloff 1, on the full
// traces through the real route path (bench/README.md) at 4–64 workers:
// 97.2–97.7 % of the bound on the conversations at request CoV ≤ 0.05
// (weight 8 alone: 94.4–94.7 %), 98.3–99.4 % on the synthetic trace at
// CoV 0.03–0.10 (weight 8: up to 0.125), 95.9–99.1 % on agentic at CoV
// 0.06, 0.17, 0.39 (weight 8: 98.1–99.3 % at 0.07, 0.17, 0.50). It costs
// agentic 4.8 ms of TTFT estimate and 2.2 points at 64 workers, and at
// 1,000 workers (not a target) 6 points on agentic and 2 on synthetic.
//
// Alternatives measured and dropped, on the offline replay of this core
// (bench/loadgen Core: the same caches and engine model, within a point
// of the route path), 4–64 workers:
//
//   - a fleet-wide weight that falls with the spread of the request counts
//     (weight / (1 + K × their CoV), K 2–8; first 2,000 requests, 16 and 64
//     workers): the spread of about 2 running requests a worker is noisy,
//     so the weight falls for the conversations too — where agentic's CoV
//     nears 0.1 at 16 workers, the conversations drop to 90–93 %;
//   - a penalty on requests above the mean (same subset): where it
//     balances agentic to CoV 0.05–0.12 it moves sessions mid-way, 86–92 %
//     on both;
//   - the falloff on decode blocks instead of requests: long prompts count
//     as busy, 94.6–96.4 % on the conversations;
//   - a steeper falloff (2): agentic CoV 0.05, 0.12, 0.28 but 94.3 % of the
//     bound at 64 workers;
//   - a larger queue weight or a smaller decode weight: a TTFT estimate
//     1–2.4 ms lower on the conversations, but agentic CoV 0.4–1.3 at
//     16–64 workers;
//   - a queue weight 4 with a steeper falloff (weight 32, falloff 6):
//     agentic CoV 0.04 and 0.10 at 4 and 16 workers and the conversations'
//     TTFT estimate 1.5–2.3 ms lower, but agentic 92.9 % of the bound at 64
//     workers (CoV 0.28) and its TTFT 2–4 ms higher — one target traded
//     for another;
//   - the pure time estimate (queued plus uncached tokens over the prefill
//     rate; first 2,000 requests): 79–89 %, CoV up to 0.6.
//
// A per-worker prefill rate learned from prefill-done timings could not
// show in the engine model, whose workers are equally fast. What no
// setting tried reaches: agentic request CoV ≤ 0.1 at 16 and 64 workers
// with ≥ 95 % of the bound, and a TTFT estimate below SGLang's and
// llm-d's, which never move a session (request CoV up to 1.9).
//
// # Engine signals
//
// A candidate may carry what its engine last reported (Candidate.Reported,
// from its /metrics: actors/enginesignals). The load beyond what the router
// had booked at that scrape is the candidate's outside load; it is added to
// the booked terms above (n, decode_blocks), so the cost sees the engine's
// reported load plus what was booked since. A saturated candidate is
// chosen only when every candidate is. Both rules and why: reported.go.
//
// # Temperature 0: deterministic tie-break
//
// The chosen candidate is the first under this total order (each step only
// decides when all earlier ones are equal):
//
//  1. lower logit (float64, exact comparison);
//  2. fewer decode_blocks (the rank's active blocks);
//  3. fewer active_prefill_tokens;
//  4. lower tieHash = mix64(h XOR keyHash(worker, dp_rank)), where
//     h = Request.Hash, or XXH3-64(Request.ID, seed 0) when Hash is 0,
//     keyHash(w, r) = mix64(uint64(w) XOR mix64(uint64(r) + 0x9E3779B97F4A7C15)),
//     and mix64 is the SplitMix64 finalizer
//     (x ^= x>>30; x *= 0xBF58476D1CE4E5B9; x ^= x>>27; x *= 0x94D049BB133111EB; x ^= x>>31);
//  5. lower (worker id, dp_rank) — only for a 64-bit hash collision.
//
// The order depends only on the candidates' values, never on their position,
// so the choice is the same for every permutation of the candidate list and
// on every run and replica. Step 4 spreads tied requests over the tied
// workers (different h → different winner) while a given request always
// lands on the same one; with a content hash as Request.Hash, identical
// prompts that tie land together.
//
// # Temperature > 0: sampling
//
// Candidate i is chosen with probability softmax(−norm_i / T), where
// norm_i = (logit_i − min) / (max − min) ∈ [0, 1] (all logits equal:
// uniform) — the reference's min-max normalised softmax. The draw is an
// exponential race (the Gumbel-max trick): the winner is the argmin of
// −ln(U_i) × exp(norm_i / T), with
// U_i = (mix64(s XOR keyHash(key_i))>>11 + 0.5) / 2^53 and s one Uint64 from
// Config.Rand per decision. It is an exact sample of that distribution and,
// unlike a cumulative walk, independent of the candidates' order: a seeded
// source gives the same choices whatever order the caller lists the
// candidates in. Candidates whose lower bound (1 − U_i)(1 + norm_i/T)
// already exceeds the best key are skipped without computing log and exp
// (exact: it only skips candidates that cannot win).
//
// # Load
//
// Load keeps, per (worker, dp_rank), the active prefill tokens and active
// blocks of the requests routed to it. Add (on route) adds the request's
// prefill tokens (isl − cached tokens) and blocks (⌈isl / bs⌉); PrefillDone
// removes its prefill tokens, its blocks stay (decode); Free removes both.
// A request never confirmed by PrefillDone expires PrefillTTL after Add, one
// never freed DecodeTTL after its PrefillDone (Expire, also run by Add and
// Route); both counted. At most MaxRequests are tracked: the oldest is
// evicted (counted), or Add refuses with ErrFull when RefuseWhenFull is set.
// Ids are caller strings of 1..MaxIDLen bytes; a duplicate id is an error;
// PrefillDone is idempotent; PrefillDone or Free of an unknown id returns
// ErrUnknownRequest (counted). DropWorker forgets an unregistered worker's
// requests. A request carrying a room rule (Request.KeepRoom, room.go) is
// booked only if its choice leaves enough other ranks with room; else
// Route returns the decision with api.ErrRoomKept and adds nothing.
//
// # Speed
//
// Decide allocates nothing in steady state: its scratch (aligned overlaps,
// rows, scores, slot hints) is reused, and Decision.Scores is that buffer
// (valid until the next decision). Overlaps are matched to candidates by a
// filtered linear scan when there are at most 8, else through a reused
// open-addressing table. A rank's load lives in a stable slot of Load; the
// Router remembers, per candidate position, the key and slot it found last
// time and checks the hint (same key, slot still holding it) instead of a
// map lookup — so callers that pass the same candidate list each time (the
// registry's slice) get the fast path, and any other list is still exact.
package routing
