// Package routing is the pure core of kvrouter's routing decision: the cost
// function over the candidate (worker, dp_rank)s (# Cost below: kvrouter's
// default, and the reference router's formula as Config.Cost CostDynamo)
// and the per-rank load bookkeeping that feeds it (# Load).
//
// A Router is a plain deterministic value — no goroutines, no clock, no I/O.
// The route actor owns one, asks the index for the request's overlaps, calls
// Route (or Decide, then Load().Add), and forwards prefill_done and free to
// Load. Every method that needs the time takes it as an argument.
//
// # Cost
//
// For each candidate (worker, dp_rank), with its overlap o (matched blocks
// from block 0; 0 when the index reports none), block size bs and the
// request's input length isl in tokens:
//
//	cached_tokens  = min(o × bs, isl)
//	new_blocks     = (isl − cached_tokens) / bs                (float)
//	queued_blocks  = active_prefill_tokens / bs                 (float)
//	prefill_blocks = queued_blocks + new_blocks
//
//	CostKVRouter (the default):  logit = overlap_weight × new_blocks + queued_blocks + decode_blocks
//	CostDynamo (the reference):  logit = overlap_weight × prefill_blocks + decode_blocks
//
// Lower is better. The cap at isl only matters for an overlap longer than the
// request (bad input); otherwise CostDynamo is the reference's formula
// exactly. Defaults: CostKVRouter, weight 8 (DefaultOverlapWeight),
// temperature 0; DynamoConfig is the reference's, weight 1. `kvrouter
// serve --cost dynamo` selects it. Degraded candidates are scored the same
// way with the overlap the index reports; the Decision says whether the
// chosen one is degraded and how many candidates were.
//
// # Why this default
//
// Measured with kvrouter-bench's engine model (bench/README.md, "Peers'
// policies"): prefill is booked on a worker until its engine reports it
// done, so the queued prefill is real, often large, load. The reference's
// cost multiplies it by the overlap weight together with the request's own
// uncached blocks: at weight 1 a worker with the conversation cached but a
// prefill queued loses to an empty one (63–74 % of the clairvoyant hit rate
// on the Mooncake traces at 4–64 workers, first 2,000 requests); raising
// the weight raises the queue's weight as well, and the hit rate stays at
// 79–89 %. Weighting only what the choice changes — the uncached blocks
// this request would have to prefill there — and counting queued prefill
// and decode blocks once as load keeps a conversation on its worker unless
// that worker is really busier: weight 8 reached 94–99 % of the bound at
// request CoV 0.03–0.14 on both traces at 4–64 workers, the same weight
// for every trace and fleet size. The alternatives measured: the
// reference's cost at weights 1–1000 (above); a pure time estimate (queued
// plus uncached tokens over the prefill rate, the reference's cost at a
// very large weight): 79–89 % and request CoV up to 0.6 at 64 workers.
//
// On the full traces (bench/README.md, "Peers' policies and the default")
// the default reaches 94.4–94.7 % of the bound on the conversation trace
// and 98.4–98.6 % on the synthetic one at 4–64 workers, request CoV
// 0.01–0.125; on the generated agentic workload, which it was not chosen
// on, 98–99 % but request CoV 0.17–0.50 at 16–64 workers: Zipf-popular
// tenants make whole workers hot, and weight 8 keeps their sessions there.
// No fixed weight met both targets on all three workloads; an adaptive
// weight was not tried.
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
// requests.
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
