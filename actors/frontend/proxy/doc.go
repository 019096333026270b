// Package proxy is kvrouter's OpenAI-compatible reverse proxy (`kvrouter
// serve --proxy-listen`): clients send their OpenAI requests to it, and it
// routes each to the engine worker holding the longest cached prefix of
// the prompt, forwards the body untouched, and streams the answer back —
// with the router's load bookkeeping following the answer, so nobody calls
// /route, prefill_done or free by hand.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions, GET
// /v1/models (the models with a registered worker). Errors are OpenAI's
// shape, {"error": {"message", "type", "code"}}, with kvrouter's reason as
// the code (missing_token, bad_json, unknown_namespace, overloaded,
// no_serving_endpoint, no_engine, …). With an API token configured every
// endpoint needs "Authorization: Bearer TOKEN" (the HTTP API's token); the
// client's Authorization header is never forwarded to the engine.
//
// # One request
//
//  1. The prompt's token ids: a completions prompt given as ids is used as
//     it is; text and chat messages go through Options.Prompts
//     (actors/frontend/prompttokens: the local tokenizer, or the engine's
//     tokenize/render endpoints). Without ids the request routes by load
//     (counted with its reason, no_token_ids when no resolver is set).
//  2. The request path (actors/frontend/requestpath) routes and books it
//     under the request id — the client's x-request-id, or a new one — and
//     lists the candidate workers with serving endpoints, best first. A
//     key (x-gateway-inference-fairness-id, else the tenant) over its rate
//     limit is answered 429 with Retry-After; when no worker has room the
//     request waits in the flow-control queue by its objective's priority
//     (x-gateway-inference-objective) while the proxy holds the client's
//     connection, and a wait past its TTL is answered 429 overloaded with
//     Retry-After.
//  3. The body goes to the first candidate's serving endpoint, same path.
//     Before any byte reached the client, a connection that fails
//     (refused, ConnectTimeout, no response headers) or an answer 502, 503
//     or 504 (the engine, not the request, is the trouble) moves on to the
//     next candidate: up to Options.Attempts tried, each retry within the
//     request path's fleet-wide retry budget and after its backoff with
//     jitter, counted with its reason; the booking follows the worker that
//     answered. Other statuses, 500 included, are passed through, not
//     retried (the engine may have worked on the request); when no retry
//     is left the last 502/503/504 is passed through. Every answer feeds
//     the endpoint's circuit breaker (requestpath.Guard): 5xx, connect
//     failures and resets before the first byte are failures.
//  4. The answer is copied chunk by chunk with a flush after each, so
//     server-sent events reach the client as the engine writes them. The
//     first byte marks prefill done; the end of the answer frees the
//     booking. Headers x-request-id and x-kvrouter-worker (WORKER:DP_RANK)
//     say which request and which worker.
//  5. Failures: a client that goes away cancels the engine's request (the
//     upstream request shares its context) and frees the booking. An engine
//     that breaks off mid-answer — it died, or sent nothing for
//     IdleTimeout — ends the client's answer with an error: a final SSE
//     event {"error": …} on a stream, then the connection is aborted so no
//     client mistakes it for a whole answer; the booking is freed first.
//
// # Split requests (prefill/decode disaggregation)
//
// A route answer with a prefill worker (api.PrefillLeg: the router split
// the request) is served in two legs (disagg.go), with the engines' own
// transfer protocol (package pdtransfer: which fields each leg carries,
// checked against the engines' source). The protocol follows the prefill
// worker's engine (registered, or detected from its KV events), or
// DisaggOptions.Protocol for all.
//   - vLLM and TensorRT-LLM: the prefill leg goes first to the prefill
//     worker's registered serving endpoint and its whole answer (at most
//     1 MiB) is read; the decode leg, built with the params it returned,
//     goes to the booking's candidates exactly as an unsplit request
//     (retries, breakers, streaming, bookkeeping).
//   - SGLang: both legs at once; the prefill leg's answer is read and
//     dropped. The decode leg's answer is held back from the client until
//     its headers (gatedWriter), so a prefill leg that fails first can
//     cancel it and be retried, or answered 502, instead.
//
// A prefill leg that fails before any byte reached the client is sent
// once more, to the route answer's alternate prefill worker
// (api.RouteResult.PrefillAlternate: the router's runner-up for the
// prefill, on another worker than the first — another dp rank of the same
// engine would likely fail with it), when DisaggOptions.PrefillRetries is
// 1 (kvrouter serve's default; the library's zero value is 0: never)
// (prefill_retry.go):
//   - which failures: the engine could not be reached (refused, dropped
//     before an answer), answered 5xx, broke off mid-answer, or answered
//     without the protocol's transfer params. Not a 4xx (the request is
//     the trouble), an answer over 1 MiB, nor a TensorRT-LLM context
//     answer that finished the request itself;
//   - when not: no alternate named (a pool of one prefill worker), the
//     alternate of another protocol or without a usable endpoint, the
//     request path's fleet-wide retry budget spent, the client gone
//     (during the leg or the backoff), or once the client received a byte
//     — which for SGLang means the decode leg's answer started; each is
//     logged with why;
//   - how: the retry is one of the request path's (the budget, then its
//     backoff); the prefill booking moves to the alternate first
//     (Booking.MovePrefill: the failed worker's prefill load is released,
//     the same prefill tokens are booked on the alternate); the legs are
//     built again for the alternate. vLLM and TensorRT-LLM (a fresh
//     disagg_request_id) send the prefill leg there, and the decode leg
//     carries the params the alternate returned; SGLang sends both legs
//     again, with the alternate's bootstrap address and a fresh room (the
//     first decode leg was cancelled before its answer reached the
//     client);
//   - what the client sees: nothing of the first attempt, only a later
//     first byte; the answer is the decode leg's as without a retry.
//
// Counted in kvrouter_proxy_prefill_retries_total{protocol,reason} (reason:
// the failed leg's outcome, connect_failed, bad_status, engine_died or
// bad_answer) and in the request path's retries (reason prefill_OUTCOME);
// each attempt is a prefill leg span with kvrouter.prefill_attempt 1 or 2,
// its outcome counted in kvrouter_proxy_prefill_legs_total. A leg that is
// not retried, or fails on the alternate too, falls back to the decode
// worker alone with the client's body (OnPrefillFailure fallback-local,
// the default) or is answered 502 prefill_failed (fail); SGLang's decode
// engines cannot prefill alone, so it is a 502 there.
//
// The prefill endpoint is the router's registered one only: the client's
// own transfer fields (kv_transfer_params, bootstrap_*,
// disaggregated_params) are removed from every body first, counted. The
// booking is the router's: its prefill load is freed by prefill_done at
// the decode leg's first byte, the rest by free at the end, whatever
// failed. The prefill endpoint has no circuit breaker of its own here.
//
// # Telemetry
//
// One OpenTelemetry server span per request ("POST /v1/completions"),
// continuing the caller's W3C traceparent; the engine's request carries
// the span's traceparent on. Metrics, per worker (see metrics.go): time to
// first token, inter-token (chunk) latency, whole-request duration,
// errors by reason; refusals by reason; and the request path's decisions,
// skipped workers and bookkeeping (requestpath.Metrics).
//
// # Not done here
//
// No request is retried once any byte of the answer reached the client,
// nor (its decode leg, an unsplit request) on a 500 or another status than
// 502/503/504; a prefill leg is retried at most once, on the one
// alternate the route answer names. Responses are passed
// through byte for byte (no re-chunking, no usage rewriting). Breakers,
// retry budget, rate limits and the flow-control queue are per router
// host: nothing of them crosses hosts.
//
// Tested end to end (e2e_test.go) against simulated engines speaking the
// same OpenAI shapes (bench/simengine's HTTP surface) over real HTTP and
// real KV event streams; not against a real vLLM or SGLang server. Split
// requests (disagg_test.go) are tested against simulated prefill and
// decode engines that check each protocol's fields, with the router's
// split faked (every answer split onto one prefill engine); the prefill
// retry (prefill_retry_test.go) over the router's own split of a fleet of
// two prefill engines and one decode engine. Not against a real engine's
// KV transfer.
package proxy
