// Package requestpath is the core the request-path front ends share — the
// OpenAI proxy (actors/frontend/proxy) and the Envoy endpoint picker
// (actors/frontend/picker): route a request, hand back where to send it,
// and keep its load booking right from what its response does, so that
// clients never call /route/{id}/prefill_done or /free themselves.
//
// # Route → candidates
//
// Path.Route asks the router (Backend: actors/service in process) for a
// decision with every candidate's score. Candidates orders them: the
// router's choice first, then the others by cost. A rank registered
// without a serving_endpoint (or one outside the data plane's subset
// hint) is skipped and counted (kvrouter_request_path_skipped_workers_total);
// when none is left the booking is freed and Route answers ErrNoEndpoint.
// A request without token ids (a text prompt without a tokenizer, a chat
// the engine did not render) routes by load: its load is sized from an
// estimate of its length with placeholder ids that match no cached block,
// and the reason is counted (..._routed_by_load_total).
//
// # Overload
//
// Config.ShedAboveBlocks defines overload from the booked load: a request
// is shed (ErrOverloaded: 429) when every candidate already has more than
// that many blocks booked — the routing cost's decode blocks, the KV
// blocks of every request routed to the rank and not yet freed. The
// router's choice is the least costly rank, so while one rank has room the
// request goes there. Off by default (0). With engine signals on
// (actors/enginesignals), a rank whose engine is saturated — queue or KV
// usage over the thresholds, or metrics stale — has no room either: when
// no candidate has room and one at least is saturated, the request is
// shed with outcome saturated (429), one mechanism for both causes. The
// bookings in flight are
// bounded too (Config.MaxInFlight); past it requests are shed. The router
// itself is bounded by Config.Admission (package admission: kvrouter
// serve shares one gate between this path and the HTTP API's /route):
// while it has as many route calls in flight as it admits, a request is
// shed at once, before the router works on it (outcome over_capacity).
//
// # Protections (Guard, one per process, shared by the front ends)
//
// Config.Guard holds a circuit breaker per serving endpoint (candidates
// whose breaker is open are skipped, breaker_open; every answer is
// counted: ok, connect_failed, status_5xx, reset before the first byte),
// the fleet-wide retry budget and backoff the proxy's retries use (only
// before the first byte, on connect failure and 502/503/504), token-bucket
// rate limits per key (fairness id, else tenant: 429 with Retry-After),
// flow control (flow.go): a request that finds no room (ErrNoRoom: the
// booked-blocks cap or saturation above) waits in a queue by priority band
// and fairness flow instead of its 429 (the band from FlowConfig's
// objectives, else those SetObjectives found in the cluster), and is
// routed again when room
// frees or on Run's tick; room can be kept for the higher bands, on every
// worker (FlowConfig.Headroom: a lower cap for the lower bands) or on
// only as many workers of the fleet as they need (FlowConfig.ReserveWorkers,
// reserve.go: a lower band's request waits, outcome reserved, while
// sending it would leave fewer workers with room; the fleet is the route
// answer's scored ranks, healthy and breaker admitting: the model's
// ranks, with the booked load the router hosts share; the router applies
// the same rule before booking, api.RoomRule, so a request held back is
// never booked) — and active health checks (health.go): an
// endpoint failing GET /health leaves the candidates (skipped, unhealthy)
// and its breaker trips open; passing again, it comes back through the
// breaker's half-open probes. The decisions are package guard's pure
// values. Everything is per router host: no state crosses hosts (each
// host's limits are its share). Breakers are not shared across hosts as
// the booked load is: each host opens its own from what it saw, so a host
// sending a sick engine little traffic learns of it later.
//
// # Bookkeeping from the response
//
// The load is booked on the router's choice. Each Booking then follows
// the response through a pure state value (State, table-tested like
// actors/listener's tracker): Served(worker) — the rank that accepted the
// request, which after a retry is not the first choice: the booking moves
// there (Backend.Rebook, routing.Load.Move) —, FirstByte — prefill done —,
// and Done — end, error, reset or client gone: free. A split request whose
// prefill leg failed before any byte may move its prefill booking once to
// the route answer's alternate prefill worker, where the front end
// retries the leg (Booking.MovePrefill, Backend.MovePrefill), before its
// prefill done. Each call is made at
// most once and Done always frees, whatever order or repetition the
// observations come in; out-of-turn ones are counted as ignored. The calls
// are not cancelled with the request (a client that went away is still
// freed). A bookkeeping call the router refuses is logged and counted; the
// router's TTLs expire what it was never told.
//
// # Why not the HTTP API
//
// The front ends run in the router's process and call the service
// directly: no HTTP hop, no JSON, and the booking can move to another
// rank, which the HTTP API does not offer (a client retrying elsewhere
// would free and route again, losing its place).
package requestpath
