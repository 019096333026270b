// Package guard holds the request path's protections as pure,
// deterministic values: a circuit breaker per serving endpoint (Breaker),
// a fleet-wide retry budget (Budget), exponential backoff with jitter
// (Backoff), a token bucket (Bucket) for rate limits, the flow-control
// queue (Queue) and an endpoint's active health state (Health). None of them
// reads a clock, sleeps, locks or draws random numbers: the time is an
// argument, the random draw too, and the caller (requestpath.Guard, the
// shell the proxy and the picker share) owns the lock. Every transition
// is therefore a table test with a hand-made clock.
//
// # What the references do
//
// SGLang's model gateway (SMG) keeps one breaker per worker — it opens
// after 10 consecutive failures, stays open 60 s, lets requests through
// half-open and closes after 3 successes — retries up to 5 times with
// backoff from 50 ms to 30 s (×1.5, jitter 0.2) and rate-limits with a
// token bucket. llm-d leaves breakers and retries to the gateway. The
// defaults here follow SMG's breaker; the retries are bounded more
// tightly (the candidate list, a budget) because an LLM request that
// failed on one engine costs a whole prefill on the next.
//
// # Why not the obvious alternatives
//
// A breaker that counts only consecutive failures misses an engine
// failing every other request, so the error rate over a window opens it
// too (with a minimum of samples, so two failures out of three do not).
// Retries capped per request alone multiply the load of a sick fleet by
// the cap; the budget keeps fleet-wide retries under a fraction of the
// requests (Finagle's and gRPC's retry budgets do the same). A fixed
// backoff synchronises retries of requests that failed together; the
// jitter spreads them.
package guard
