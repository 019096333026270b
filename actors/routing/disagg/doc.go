// Package disagg is the pure core of kvrouter's prefill/decode
// disaggregation decision: for one request whose decode worker the cost
// function (package routing) has chosen, whether to have another worker
// prefill it remotely, and which prefill worker. Plain values in, one
// Outcome out: no clock, no I/O, the same answer for every order of the
// candidates.
//
// # Roles
//
// A registration's role (messages/api: prefill, decode, both — the default)
// splits a namespace into pools. The route actor (package routing) scores
// the decode and both roles with the usual cost (overlap, booked decode
// blocks, running requests) to choose the decode leg: a prefill-only
// worker is never a decode leg, nor a /select answer. The prefill pool is
// the prefill-role workers. A namespace with no role other than both is
// routed exactly as before roles existed, and its answers carry no
// disaggregation at all.
//
// # The decision
//
// With dec the chosen decode worker's cached prompt tokens, isl the
// prompt's length and uncached = isl − dec:
//
//   - ModeNever: no split (reason never);
//   - no prefill worker: no split (no_prefill_pool);
//   - ModeAlways: split (always);
//   - ModeAuto (the default): no split when dec ≥ MaxDecodeHit × isl
//     (warm_decode) or uncached < MinUncachedTokens (short_uncached); else
//     split (uncached).
//
// A split's prefill leg goes to the prefill worker that would finish it
// first: the fewest tokens to compute there, its queued (booked) prefill
// tokens plus the prompt tokens it does not hold — so a worker holding the
// prefix wins unless its queue is longer than the prefix it saves. Ties go
// to the larger overlap, then a per-request hash of the key (spreading
// tied requests, the same request always to the same worker), then the
// lower key. A saturated prefill worker is chosen only when every one is.
//
// The outcome also names an alternate: the runner-up by the same order
// among the prefill workers other than the chosen one's worker (another
// dp rank of the same engine would most likely fail with it). A front end
// whose prefill leg failed before any byte reached its client retries the
// leg there once (actors/frontend/proxy), moving the prefill booking; a
// pool of one worker has no alternate.
//
// # What the references do
//
// Dynamo (ai-dynamo/dynamo) runs a prefill router as soon as prefill
// workers register: the prefill worker is chosen with its KV-aware cost
// (overlap against load), then the decode worker. Its earlier conditional
// disaggregation, and TensorRT-LLM's disaggregated server, kept the
// prefill local when the part of the prompt the decode side does not hold
// was at most max_local_prefill_length tokens (Dynamo's default 1,000),
// with a cap on the prefill queue. llm-d's inference scheduler
// (llm-d/llm-d-inference-scheduler, the prefix-based P/D decider) is
// decode first: it scores the decode pods, then splits only when the
// prompt minus the chosen decode pod's cached prefix is at least
// nonCachedTokens (0 disables disaggregation); the prefill pod is scored
// by its own profile, and the decode pod's sidecar learns it from the
// x-prefiller-host-port header.
//
// # Why ours is what it is
//
// Decode first, as llm-d: the decode leg holds the request for its whole
// life and keeps the conversation's cache for the next turn, so it is the
// choice that matters most and the one today's cost already makes well;
// choosing the prefill worker first (Dynamo) would let a cold prefill pool
// pull a conversation away from the decode worker that holds it. The
// uncached-length rule is both references' rule: below a few hundred
// tokens the transfer's round trips cost more than the local prefill
// saves. The hit fraction is added because the uncached length alone
// splits a 100,000-token prompt whose last 2,000 tokens are new, where the
// decode worker's local prefill of those 2,000 tokens is cheap next to
// moving the KV of the whole prompt from a prefill worker that may hold
// none of it. The prefill leg's cost is a time estimate (queued plus
// uncached tokens), not the decode cost's weighted sum: a prefill worker
// holds nothing for long, so only how soon it finishes matters.
//
// # Why these defaults
//
// MinUncachedTokens 512 sits between llm-d's typical settings and
// Dynamo's 1,000 (smaller prompts' prefill is a single engine step on the
// GPUs these fleets run); MaxDecodeHit 0.8 keeps a multi-turn conversation
// on its decode worker once most of it is cached. Neither is measured on a
// disaggregated fleet here; kvrouter serve's --disagg-min-uncached-tokens
// and --disagg-max-decode-hit change them.
//
// # Not done
//
// The decision does not compare the remote prefill's cost with the local
// one under load (a busy prefill pool still takes a long cold prompt), and
// it does not weigh the transfer's size against the prefill worker's
// cached prefix.
package disagg
