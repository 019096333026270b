// Package httpapi is the HTTP edge of `kvrouter serve`: it decodes and
// validates requests, calls an api.Backend (messages/api: the registry,
// index and router, implemented by actors/service) and encodes the answers. It holds no routing or
// index logic, so it is tested against a fake Backend with no sockets.
//
// # Endpoints
//
// Drop-in for clients of Dynamo's standalone KV indexer
// and of the Mooncake KV-indexer RFC (same paths and JSON shapes):
//
//	POST /register      {instance_id, endpoint, model_name, tenant_id?, block_size?, dp_rank?, lora_name?, replay_endpoint?,
//	                     serving_endpoint?, engine?, metrics_endpoint?}
//	                    → 201 {"status":"ok"} · 400 invalid_value (an unknown engine, …) · 409 already registered / block size mismatch
//	POST /unregister    {instance_id, model_name, tenant_id?, dp_rank?} → 200 {"status":"ok"} · 404 unknown_worker
//	GET  /workers       → [{"instance_id":1,"endpoints":{"0":"tcp://…"},"ranks":[{…state, last_seq, lag_seconds,
//	                       engine, engine_detected?, engine_evidence?, warnings…}]}]
//	POST /query         {token_ids, model_name, tenant_id?, lora_name?, cache_salt?, include_instances?}
//	                    → {"scores":{"<worker>":{"<dp_rank>":tokens}},"frequencies":[…],"tree_sizes":{…},
//	                       "instances"?:{"<worker>":{longest_matched, gpu, dp:{"<dp_rank>":tokens}, cpu, disk}}}
//	POST /query_by_hash {block_hashes, model_name, tenant_id?, include_instances?} → same shape
//	GET  /dump          → the replayable events, one JSON document (dump.go)
//	POST /register_peer {url} → 201 {"status":"ok"} (again: 201 too)
//	POST /deregister_peer {url} → 200 {"status":"ok"} · 404 unknown_peer
//	GET  /peers         → ["http://peer:8090", …], sorted
//	GET  /health        → 200, empty body (liveness, as the reference answers it)
//
// Drop-in for clients of Dynamo's standalone selection service (its
// paths, JSON shapes and statuses; selection.go maps each onto the route
// path and lists the remaining differences):
//
//	POST /select, /select_and_reserve, /reservations, /potential_loads, /overlap_scores
//	POST /reservations/{id}/prefill_complete, /reservations/{id}/output_block · DELETE /reservations/{id}
//	GET  /loads[?model_name=…&routing_group=…]
//
// kvrouter's own:
//
//	POST /route         {token_ids | block_hashes, model_name, tenant_id?, lora_name?, cache_salt?,
//	                     session_id?, request_id?, include_scores?}
//	                    → {worker_id, dp_rank, overlap_blocks, cached_tokens, overlap_by_tier?,
//	                       session_credit_blocks?, degraded?, scores?, request_id,
//	                       partial?, recovering_workers?}
//	POST /route/{request_id}/prefill_done → 200 {"status":"ok"} · 404 unknown_request
//	POST /route/{request_id}/free         → 200 {"status":"ok"} · 404 unknown_request
//	GET  /sessions/{session_id}[?chain=true]
//	                    → {session_id, namespaces:[{model_name, tenant_id, last_seen, lineages:[{worker_id,
//	                       dp_rank, depth, blocks, newest_hash, updated, chain?}]}]} · 404 unknown_session
//	DELETE /sessions/{session_id}         → 200 {"status":"ok"} · 404 unknown_session
//	GET  /healthz (liveness, {"status":"ok"}) · GET /readyz (Backend.Ready; 503 when not ready) · GET /metrics
//
// A registered peer is a source of dumps for recovery (peers.go,
// Backend.RegisterPeer): a router that follows no worker yet loads the
// peer's /dump and follows its engines, as `serve --bootstrap-from` does at
// start (whose peer is listed too); a router that already follows workers
// only lists it.
//
// # Remaining differences from Dynamo's standalone indexer
//
// Checked against its HTTP server's source (routes, bodies, statuses);
// each is kept for the reason given.
//   - Error bodies carry "reason" beside "error" ({"error":"peer not
//     found"} there): a client reading "error" sees the same key; the
//     reason is a stable label for scripts and metrics.
//   - /query and /query_by_hash without tenant_id ask the "default" tenant;
//     the reference fans out over every tenant of the model and merges the
//     scores. Merging tenants' scores mixes isolated caches (a tenant's
//     blocks would count for another's request), which tenant isolation
//     exists to prevent.
//   - /query and /query_by_hash add the reference's per-instance tier
//     breakdown ("instances": each registered worker's longest_matched,
//     gpu, dp, cpu and disk, in tokens, cumulative gpu ≤ cpu ≤ disk as the
//     Mooncake RFC has it) only when the body asks include_instances:
//     true; the reference always adds it. It walks every matched block's
//     tiers once more, which the hot path of /query should not pay for
//     clients that read only scores. The scores themselves count a prefix
//     held on any tier (the reference's count the device tier only): a
//     block offloaded to host is still a hit for an offloading engine
//     (actors/indexer/radix, Tiers). On a cluster, a score answered by
//     another member's shard carries its tier split but not its reach, so
//     its gpu and cpu are bounded from the split: exact when every matched
//     block is on device (or device and host), else too low, never too
//     high.
//   - /query accepts cache_salt (the reference hashes with lora_name
//     only): without it a salted tenant's prompts could not be queried.
//   - /register_peer checks the URL (http(s)://host:port, 400
//     invalid_value otherwise) and keeps at most 64 peers; the reference
//     stores any string. A peer is fetched by the router: an arbitrary
//     string or an unbounded list is a request-forgery and memory risk.
//   - Peer recovery: the reference recovers from its peers (--peers) when
//     it starts; kvrouter recovers a router that follows no worker
//     (at start from --bootstrap-from, or when a peer is registered) and
//     never merges a peer's dump into live state, where the engines' own
//     streams and replay buffers are the truth (a stale dump would bring
//     back evicted blocks). A cluster member only lists peers: its members
//     rebuild from the engines and from each other.
//   - /test/pause_listener and /test/resume_listener (the reference's test
//     hooks) do not exist: an endpoint that stops ingestion has no place
//     in a production API; kvrouter's listener tests drive the listener
//     directly.
//   - Body caps: the reference caps /query bodies at a fixed size;
//     kvrouter derives its cap from --max-prompt-tokens.
//   - /metrics serves kvrouter_* series (and go_*, process_*), not the
//     reference's metric names: dashboards are written against kvrouter's.
//   - DYN_ROUTER_MIN_INITIAL_WORKERS (a start-up gate before the listener
//     binds) is not read: /readyz reports readiness instead, and the API
//     serves from the start so that workers can register.
//   - Authentication: optional here (off by default, as there); with a
//     token set, mutating endpoints need it.
//
// # The engine of a registration
//
// engine (a kvrouter extension, like serving_endpoint) says which engine
// publishes the stream: "auto", "vllm", "sglang" or "trtllm"; absent, the
// server's --engine (auto unless set). Any other value is 400
// invalid_value naming the accepted ones. Each rank in /workers shows its
// engine; engine_detected, the engine its batches show (absent before its
// first batch, or while they fit several engines: positional events
// without SGLang's metadata map are vLLM ≤ 0.25's or SGLang's);
// engine_evidence, what they showed ("seqs counted from 0, map-encoded
// events"). A stream that shows what its explicit engine never sends (a
// nanosecond-timestamp seq registered as vllm, SGLang's metadata map
// registered as trtllm, …) is still decoded as registered, with a warning
// naming both engines, a log line once per stream and
// kvrouter_engine_contradictions_total{worker,dp_rank,engine}. What auto
// does before the first batch, and what each engine shows:
// messages/engine/README.md.
//
// As in the reference, tenant_id defaults to "default" (on /unregister its
// absence means every tenant of the model), dp_rank to 0 (on /unregister
// every rank) and block_size, which the reference requires, to the server's
// --block-size. A string field sent as "" counts as absent, as it does for
// engine events.
//
// # Errors
//
// Every error is {"error": "<for humans>", "reason": "<snake_case>"}. Client
// input never gets a 5xx: bad JSON, a non-object body or trailing data
// (bad_json), a wrong JSON type (wrong_type), a negative, fractional or
// too large number (negative_number, not_an_integer, out_of_range), a
// missing required field (missing_field), an unacceptable value
// (invalid_value, too_long) → 400; a body over Options.MaxBodyBytes
// (body_too_large), too many token_ids or block_hashes (too_many_tokens,
// too_many_block_hashes) → 413 (the caps: 1,048,576 tokens, 262,144
// hashes, and a body cap derived from them, BodyBytesFor, so a request
// within the list caps is never refused for its size); a Content-Type other than JSON → 415
// (unsupported_media_type: also what keeps browsers from posting
// cross-site without a CORS preflight); a wrong method → 405 with Allow;
// an unknown path → 404. Backend errors map by class (see Backend): 400
// (e.g. invalid_session_id), 404 (unknown_worker, unknown_request,
// unknown_namespace, unknown_session), 409, 503; a /route over
// Options.Admission's cap → 503 overloaded, once its body is decoded and
// before the router works on it; a /route or /select_and_reserve the edge
// refuses (Options.Edge: too much in flight, or the gate full) → 503
// overloaded before its body is read, a Content-Length over the body cap
// → 413 body_too_large unread (edge.go; every 503 carries Retry-After: 1); any
// other error is logged and answered 500 "internal" without its text, as is
// a recovered panic (counted in kvrouter_http_panics_total).
//
// Integers are decoded as Go unsigned integers, never through float64, so
// 64-bit ids and hashes arrive exactly; a fraction or exponent is rejected
// (1.0 is not an id). block_hashes also accept negative values down to
// -2^63, kept as their two's-complement bits: the reference types them i64.
// The integer arrays (token_ids, block_hashes) are read by a small parser
// of their own (handjson.go), because encoding/json silently turns [1,null]
// into [1,0]; the hot bodies take a one-pass fast path (handjson.go) that
// FuzzFastDecode checks against the general one.
//
// # Decisions
//
// Unknown JSON fields: accepted (ignored) on the Dynamo drop-in endpoints,
// as serde does there by default and as clients written for the reference
// or the Mooncake RFC may send extra keys (e.g. "medium"); rejected with
// 400 unknown_field on /route, kvrouter's own endpoint, where a misspelt
// optional field (sesion_id, cache_slat) would otherwise silently change
// the routing.
//
// Authentication: with Options.APIToken set, `Authorization: Bearer
// <token>` is required (401 missing_token / invalid_token, with
// WWW-Authenticate) on /register, /unregister, the two bookkeeping
// endpoints, DELETE /sessions/{session_id} AND /route itself: /route books load on a worker, and an
// anonymous caller able to book load that only a token holder can free
// could steer traffic by flooding it. Reads (/workers, /query,
// /query_by_hash, /dump, GET /sessions/{session_id}, /metrics) are open
// unless Options.ProtectReads;
// /healthz and /readyz are always open. The token is compared as SHA-256
// digests with crypto/subtle, so neither its content nor its length leaks
// through timing.
//
// Dump format: one JSON document in the reference's shape (an object keyed
// "<model>:<tenant>"), streamed as it is produced; see dump.go for the
// layout, why, and ReadDump, which reads it (and the reference's dumps)
// back for `serve --bootstrap-from`.
//
// Request ids: /route books load under the client's request_id, or under
// one the server draws from crypto/rand (unguessable, so another client
// cannot free it). Ids are 1–128 characters of [A-Za-z0-9._~:-].
//
// Session ids (/route's session_id, the path of /sessions/{session_id},
// URL-unescaped) are producer input the engines also report: the Backend
// checks them (kvrouter serve: 1–256 bytes of printable ASCII) and answers
// 400 invalid_session_id otherwise. A session is a hint: a session_id with
// no lineage routes as without one.
package httpapi
