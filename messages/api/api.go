// Package api is the contract between kvrouter's front ends and its
// backend: the Backend interface, its plain request and answer types (the
// JSON tags are the HTTP API's shapes, Dynamo's standalone indexer's where
// it has them), the client-facing error classes and the reason labels of
// error answers. It holds no decoding or transport: a front end (HTTP,
// an OpenAI proxy, an Envoy ext_proc picker) brings its own.
package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// Backend is what a front end (the HTTP API, actors/frontend/httpapi)
// asks of the rest of kvrouter: the
// registry of engine endpoints, the index and the router. The server decodes
// and validates every request before calling it, so a Backend receives only
// well-formed values (required fields present, names non-empty, lists within
// the caps, tenant defaulted); it still owns the semantic checks (does the
// worker exist, does the block size match the namespace).
//
// Errors: an error that wraps ErrInvalid, ErrNotFound, ErrConflict or
// ErrUnavailable (directly or through Errorf) is a client-facing answer — 400,
// 404, 409, 503 — and its full text is shown to the client. Any other error
// is logged and answered 500 {"reason": "internal"} without its text.
//
// Methods are called concurrently from many requests.
type Backend interface {
	// Register starts following one engine endpoint (one dp rank of a
	// worker). A rank already registered → ErrConflict.
	Register(ctx context.Context, reg Registration) error
	// Unregister stops following a worker's ranks and drops their blocks.
	// An unknown worker or rank → ErrNotFound.
	Unregister(ctx context.Context, ref WorkerRef) error
	// Workers lists every registered worker with the state of each rank.
	Workers(ctx context.Context) ([]WorkerInfo, error)
	// Query hashes token ids in the namespace's block size and returns the
	// overlap of every (worker, dp_rank), in tokens.
	Query(ctx context.Context, req QueryRequest) (QueryResult, error)
	// QueryByHash is Query for block hashes computed by the client.
	QueryByHash(ctx context.Context, req QueryByHashRequest) (QueryResult, error)
	// Dump feeds sink the events that rebuild the current index: for each
	// namespace, Namespace once and then its events. An error from sink
	// (the client went away) must stop the dump and be returned.
	Dump(ctx context.Context, sink DumpSink) error
	// Route picks the (worker, dp_rank) for a request and books its load
	// under req.RequestID (always set: the server generates one when the
	// client sent none). A request id already booked → ErrConflict.
	Route(ctx context.Context, req RouteRequest) (RouteResult, error)
	// PrefillDone moves a routed request's load from prefill to decode.
	// An unknown request id → ErrNotFound.
	PrefillDone(ctx context.Context, requestID string) error
	// Free removes a routed request's load. An unknown request id →
	// ErrNotFound.
	Free(ctx context.Context, requestID string) error
	// Session returns a session's lineage in every namespace holding it
	// (GET /sessions/{session_id}). A session no namespace holds →
	// ErrNotFound; an id the Backend does not accept (session ids are
	// untrusted) → ErrInvalid.
	Session(ctx context.Context, req SessionRequest) (SessionInfo, error)
	// ForgetSession drops a session's lineage in every namespace (DELETE
	// /sessions/{session_id}). A session no namespace holds → ErrNotFound;
	// an id the Backend does not accept → ErrInvalid.
	ForgetSession(ctx context.Context, id string) error
	// Ready reports whether the router can answer route requests (nil) or
	// not yet; a non-nil error answers /readyz with 503.
	Ready(ctx context.Context) error
	// RegisterPeer adds a peer router (its http(s)://host:port) as a source
	// of dumps for recovery (POST /register_peer); registering one twice
	// is not an error. A URL the Backend does not accept → ErrInvalid.
	RegisterPeer(ctx context.Context, url string) error
	// DeregisterPeer removes a peer; an unknown one → ErrNotFound.
	DeregisterPeer(ctx context.Context, url string) error
	// Peers lists the registered peers, sorted.
	Peers(ctx context.Context) ([]string, error)
}

// Client-facing error classes a Backend wraps (see Backend).
var (
	ErrInvalid     = errors.New("invalid request")         // 400, reason "invalid_value"
	ErrNotFound    = errors.New("not found")               // 404, reason per endpoint
	ErrConflict    = errors.New("conflict")                // 409, reason "conflict"
	ErrUnavailable = errors.New("temporarily unavailable") // 503, reason "unavailable"
)

// IsClientFacing reports whether err belongs to one of the client-facing
// classes, whose text may be shown.
func IsClientFacing(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, ErrConflict) || errors.Is(err, ErrUnavailable)
}

// Error is a client-facing Backend error with its own reason label. Kind is
// one of ErrInvalid, ErrNotFound, ErrConflict, ErrUnavailable; Reason is a
// snake_case label from a small fixed set (it becomes a metrics label for
// some callers, so never put ids in it); Msg is shown to the client.
type Error struct {
	Kind   error
	Reason string
	Msg    string
}

// Error returns the message shown to the client.
func (e *Error) Error() string { return e.Msg }

// Unwrap returns the error class, so errors.Is(err, ErrNotFound) works.
func (e *Error) Unwrap() error { return e.Kind }

// Errorf returns an *Error of class kind with a reason label and a
// formatted message, e.g.
//
//	Errorf(ErrConflict, "block_size_mismatch", "model %q uses block size %d, not %d", m, have, want)
func Errorf(kind error, reason, format string, args ...any) error {
	return &Error{Kind: kind, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// DefaultTenant is the tenant of requests that name none (as the reference
// indexer's serde default).
const DefaultTenant = "default"

// Registration is the body of POST /register: one engine endpoint, i.e. one
// dp rank of a worker, in one (model_name, tenant_id) namespace.
//
// BlockSize 0 means "not given": the Backend applies its default (the
// reference requires the field; kvrouter takes `--block-size`). DpRank
// defaults to 0. LoraName and ReplayEndpoint are "" when absent.
// ServingEndpoint is where the request path (proxy, endpoint picker) sends
// the rank's requests — host:port or http(s)://host:port (package
// messages/serving); "" when absent: the rank is still routed by /route but
// the request path skips it. Engine is the engine choice (messages/engine):
// auto (decided per stream from what it shows), vllm, sglang or trtllm;
// "" when absent: the Backend applies its default (`--engine`).
// MetricsEndpoint is the URL of the engine's Prometheus metrics
// (http(s)://host:port/path); "" when absent: the serving endpoint's
// /metrics (TensorRT-LLM's /prometheus/metrics), scraped when engine
// signals are on (actors/enginesignals).
type Registration struct {
	InstanceID      messages.WorkerID `json:"instance_id"`
	Endpoint        string            `json:"endpoint"`
	ModelName       string            `json:"model_name"`
	TenantID        string            `json:"tenant_id"`
	BlockSize       uint32            `json:"block_size,omitempty"`
	DpRank          messages.DpRank   `json:"dp_rank"`
	LoraName        string            `json:"lora_name,omitempty"`
	ReplayEndpoint  string            `json:"replay_endpoint,omitempty"`
	ServingEndpoint string            `json:"serving_endpoint,omitempty"`
	Engine          string            `json:"engine,omitempty"`
	// Events is EventsNone for a worker that publishes no KV events (then
	// Endpoint and ReplayEndpoint are empty): the router keeps an
	// approximate cache of it from its own decisions, of CacheBlocks
	// blocks (0: the server's default). "": it publishes events at
	// Endpoint.
	Events          string `json:"events,omitempty"`
	CacheBlocks     uint32 `json:"cache_blocks,omitempty"`
	MetricsEndpoint string `json:"metrics_endpoint,omitempty"`
	// Role is the endpoint's role in a disaggregated fleet (RolePrefill,
	// RoleDecode, RoleBoth; "" is RoleBoth). BootstrapHost and
	// BootstrapPort are where an SGLang prefill engine's KV transfer
	// bootstrap server listens (BootstrapHost "" : the serving
	// endpoint's host).
	Role          string `json:"role,omitempty"`
	BootstrapHost string `json:"bootstrap_host,omitempty"`
	BootstrapPort uint16 `json:"bootstrap_port,omitempty"`
	// Bind: the router binds Endpoint and the engine dials it (llm-d
	// style). Topic is a subscription prefix ("": every topic). TopicPod,
	// when set, is the pod this worker's engine names in its topic
	// kv@<pod>@<model> (vLLM's kv@<pod IP>:<port>@<model>) on a socket
	// several workers share, told apart by that topic
	// (actors/listener/README.md, "Topics"). Set by kvrouter serve's
	// --worker (bind, topic=, by-topic,pod=); POST /register takes none
	// of them.
	Bind     bool   `json:"bind,omitempty"`
	Topic    string `json:"topic,omitempty"`
	TopicPod string `json:"topic_pod,omitempty"`
}

// SharedSocket reports whether the registration is a pod of a socket
// shared by topic.
func (r Registration) SharedSocket() bool { return r.TopicPod != "" }

// Registration.Events values.
const (
	// EventsZMQ (the default, stored as ""): KV events over ZeroMQ.
	EventsZMQ = "zmq"
	// EventsNone: no KV events; routed by the router's predictions alone.
	EventsNone = "none"
)

// EventLess reports whether the registration publishes no events.
func (r Registration) EventLess() bool { return r.Events == EventsNone }

// WorkerRef is the body of POST /unregister. TenantID "" means every tenant
// of the model and DpRank nil every rank of the worker (the reference's
// semantics for absent fields).
type WorkerRef struct {
	InstanceID messages.WorkerID `json:"instance_id"`
	ModelName  string            `json:"model_name"`
	TenantID   string            `json:"tenant_id,omitempty"`
	DpRank     *messages.DpRank  `json:"dp_rank,omitempty"`
}

// QueryRequest is the body of POST /query. CacheSalt is a kvrouter
// extension (the salt separates namespaces in the block hash, so a query
// must name it to match salted blocks); "" means none, as does LoraName "".
// IncludeInstances asks for QueryResult.Instances.
type QueryRequest struct {
	TokenIDs         []uint32 `json:"token_ids"`
	ModelName        string   `json:"model_name"`
	TenantID         string   `json:"tenant_id"`
	LoraName         string   `json:"lora_name,omitempty"`
	CacheSalt        string   `json:"cache_salt,omitempty"`
	IncludeInstances bool     `json:"include_instances,omitempty"`
}

// QueryByHashRequest is the body of POST /query_by_hash: kvrouter local
// block hashes (see messages/blockhash), already namespaced by LoRA and salt.
type QueryByHashRequest struct {
	BlockHashes      []messages.LocalHash `json:"block_hashes"`
	ModelName        string               `json:"model_name"`
	TenantID         string               `json:"tenant_id"`
	IncludeInstances bool                 `json:"include_instances,omitempty"`
}

// QueryResult is the answer of /query and /query_by_hash, in the
// reference's shape: Scores[worker][dp_rank] is the matched prefix in
// TOKENS (blocks × block size; zeros may be omitted), Frequencies[d] the
// number of (worker, dp_rank) holding block d of the query, TreeSizes the
// blocks each (worker, dp_rank) holds. JSON object keys are the decimal ids.
// Instances (when the request asked include_instances) is the reference's
// per-instance tier breakdown: each registered worker's reach through the
// tiers, in tokens (TierReach), zeros included.
type QueryResult struct {
	Scores      map[messages.WorkerID]map[messages.DpRank]uint64 `json:"scores"`
	Frequencies []uint64                                         `json:"frequencies"`
	TreeSizes   map[messages.WorkerID]map[messages.DpRank]uint64 `json:"tree_sizes"`
	Instances   map[messages.WorkerID]TierReach                  `json:"instances,omitempty"`
}

// RouteRequest is the body of POST /route: exactly one of TokenIDs and
// BlockHashes. LoraName and CacheSalt select the hash namespace of TokenIDs
// (block hashes are already namespaced, so they may not be combined with
// BlockHashes). SessionID is a hint for the router; RequestID names the
// booking for /route/{request_id}/prefill_done and /free. IncludeScores asks
// for every candidate's score in the answer. KeepRoom is the in-process
// request path's only (never read from a body): see RoomRule.
type RouteRequest struct {
	TokenIDs      []uint32             `json:"token_ids,omitempty"`
	BlockHashes   []messages.LocalHash `json:"block_hashes,omitempty"`
	ModelName     string               `json:"model_name"`
	TenantID      string               `json:"tenant_id"`
	LoraName      string               `json:"lora_name,omitempty"`
	CacheSalt     string               `json:"cache_salt,omitempty"`
	SessionID     string               `json:"session_id,omitempty"`
	RequestID     string               `json:"request_id,omitempty"`
	IncludeScores bool                 `json:"include_scores,omitempty"`
	KeepRoom      RoomRule             `json:"-"`
}

// RoomRule makes a route's booking conditional on room left for higher
// priority bands (the request path's flow-control reserve): with Ranks
// above 0 the router books its choice only if, that rank left aside, at
// least Ranks candidates still have room — an engine not saturated and at
// most AboveBlocks decode blocks booked (0: no cap). Otherwise the route
// fails with ErrRoomKept and nothing is booked or predicted, so no other
// request ever sees a booking that was going to be refused. The zero
// value keeps no room. Namespaces with prefill/decode roles ignore it.
type RoomRule struct {
	Ranks       int
	AboveBlocks uint64
}

// ErrRoomKept is the route error of a request refused by its RoomRule.
var ErrRoomKept = errors.New("room kept for higher priority bands")

// RouteResult is the answer of POST /route: the chosen (worker, dp_rank),
// its physical overlap in blocks and tokens (OverlapByTier splits the
// blocks by storage tier name — "device", "host", "disk", "external" — when
// the index knows), SessionCreditBlocks the blocks the request's session
// lineage added to the chosen candidate's overlap before the choice (absent
// when none), Degraded when the chosen stream is not exact (its overlap is
// what the index knows, which may be less than the worker holds), and the
// request id its load is booked under. Scores show the overlaps the router
// scored, session credit included. ServingEndpoint is the chosen rank's
// registered serving endpoint (absent when it has none).
type RouteResult struct {
	WorkerID            messages.WorkerID `json:"worker_id"`
	DpRank              messages.DpRank   `json:"dp_rank"`
	OverlapBlocks       uint32            `json:"overlap_blocks"`
	CachedTokens        uint64            `json:"cached_tokens"`
	OverlapByTier       map[string]uint32 `json:"overlap_by_tier,omitempty"`
	SessionCreditBlocks uint32            `json:"session_credit_blocks,omitempty"`
	// PredictedBlocks is how many blocks the router scored beyond the
	// chosen worker's event-confirmed overlap (and session credit) because
	// it predicted them there: blocks of requests it routed there that the
	// engine has not yet reported (actors/routing/predicted).
	PredictedBlocks uint32       `json:"predicted_blocks,omitempty"`
	Degraded        bool         `json:"degraded,omitempty"`
	ServingEndpoint string       `json:"serving_endpoint,omitempty"`
	Scores          []RouteScore `json:"scores,omitempty"`
	RequestID       string       `json:"request_id"`
	// Recovering lists the candidate workers whose overlap the index could
	// not fully answer for (in a cluster: their shard missed the deadline
	// or is rebuilding after a host loss): their overlap may be too low,
	// never too high. Partial is set when there are any.
	Recovering []messages.WorkerID `json:"recovering_workers,omitempty"`
	Partial    bool                `json:"partial,omitempty"`
	// PrefillWorker is the prefill leg when the router split the request
	// (WorkerID above is then the decode leg); nil when the chosen worker
	// prefills locally. Disaggregation says why it split or not; nil when
	// the namespace has no prefill or decode roles at all.
	PrefillWorker *PrefillLeg `json:"prefill_worker,omitempty"`
	// PrefillAlternate is another prefill worker a split request's
	// prefill leg may be retried on when it fails before any answer byte
	// (the decision's runner-up, on another worker); nil when there is
	// none, and when not split. Nothing is booked on it until a retry
	// moves the prefill load there (the request path's MovePrefill).
	PrefillAlternate *PrefillLeg     `json:"prefill_alternate,omitempty"`
	Disaggregation   *Disaggregation `json:"disaggregation,omitempty"`
}

// RouteScore is one candidate's side of the cost function (actors/routing), present when
// the request asked include_scores. Logit is the cost (lowest wins at
// temperature 0); it must be finite. ServingEndpoint is the candidate's
// registered serving endpoint (absent when none).
type RouteScore struct {
	WorkerID            messages.WorkerID `json:"worker_id"`
	DpRank              messages.DpRank   `json:"dp_rank"`
	OverlapBlocks       uint32            `json:"overlap_blocks"`
	ActivePrefillTokens uint64            `json:"active_prefill_tokens"`
	ActiveDecodeBlocks  uint64            `json:"active_decode_blocks"`
	Logit               float64           `json:"logit"`
	Degraded            bool              `json:"degraded,omitempty"`
	ServingEndpoint     string            `json:"serving_endpoint,omitempty"`
	// Saturated: the candidate's engine reports saturation
	// (actors/enginesignals); it is chosen only when every candidate is.
	Saturated bool `json:"saturated,omitempty"`
}

// SessionRequest asks for a session's lineage (GET
// /sessions/{session_id}?chain=…): Chain asks for every lineage's engine
// hashes.
type SessionRequest struct {
	ID    string `json:"session_id"`
	Chain bool   `json:"chain,omitempty"`
}

// SessionInfo is the answer of GET /sessions/{session_id}: the session's
// lineage in each (model_name, tenant_id) namespace holding it, sorted by
// model and tenant.
type SessionInfo struct {
	SessionID  string             `json:"session_id"`
	Namespaces []SessionNamespace `json:"namespaces"`
}

// SessionNamespace is a session's lineage in one namespace: LastSeen is
// the time of its last store there, Lineages one per (worker, dp_rank),
// the most recently stored to first.
type SessionNamespace struct {
	ModelName string           `json:"model_name"`
	TenantID  string           `json:"tenant_id"`
	LastSeen  time.Time        `json:"last_seen"`
	Lineages  []SessionLineage `json:"lineages"`
}

// SessionLineage is what a session stored on one (worker, dp_rank): Depth
// blocks in the chain ending at its newest block (the routing credit's
// base), Blocks live blocks in all, the engine hash of the newest block and
// when it was stored; Chain (when asked) lists the chain's engine hashes,
// oldest first.
type SessionLineage struct {
	WorkerID   messages.WorkerID       `json:"worker_id"`
	DpRank     messages.DpRank         `json:"dp_rank"`
	Depth      uint32                  `json:"depth"`
	Blocks     uint64                  `json:"blocks"`
	NewestHash messages.ExternalHash   `json:"newest_hash"`
	Updated    time.Time               `json:"updated"`
	Chain      []messages.ExternalHash `json:"chain,omitempty"`
}

// DumpNamespace opens one (model_name, tenant_id) index in a dump.
type DumpNamespace struct {
	ModelName string
	TenantID  string
	BlockSize uint32
	// Streams are the namespace's registered engine streams and where the
	// dumped state of each stands (kvrouter's addition; see DumpStream).
	Streams []DumpStream
}

// DumpSink receives a dump (Backend.Dump, ReadDump): Namespace once per
// namespace, then that namespace's events in apply order. A RouterEvent is
// replayable as is: applying a dump's events to an empty index rebuilds the
// dumped state.
type DumpSink interface {
	Namespace(ns DumpNamespace) error
	Event(ev messages.RouterEvent) error
}

// DumpStream is one registered engine stream in a dump ("streams" in a
// namespace, before its events; readers of the reference's format ignore
// it): the registration, so a router loading the dump follows the same
// endpoints, and the stream's position — the publisher seq of the last
// engine batch whose events are in the dump, and whether the dumped state
// of it was exact — so it can resume the stream there instead of dropping
// what it loaded (kvrouter serve --bootstrap-from). Engine is the
// registration's engine choice (absent in older dumps: the loading
// router's default). Bind, Topic and TopicPod are the registration's
// (Registration). Seq is absent when the position is unknown (nothing
// applied yet, or lost) and for a pod of a shared socket, which has no
// replay to resume from.
type DumpStream struct {
	WorkerID        messages.WorkerID `json:"worker_id"`
	DpRank          messages.DpRank   `json:"dp_rank"`
	Endpoint        string            `json:"endpoint"`
	ReplayEndpoint  string            `json:"replay_endpoint,omitempty"`
	LoraName        string            `json:"lora_name,omitempty"`
	ServingEndpoint string            `json:"serving_endpoint,omitempty"`
	Engine          string            `json:"engine,omitempty"`
	MetricsEndpoint string            `json:"metrics_endpoint,omitempty"`
	Role            string            `json:"role,omitempty"`
	BootstrapHost   string            `json:"bootstrap_host,omitempty"`
	BootstrapPort   uint16            `json:"bootstrap_port,omitempty"`
	Bind            bool              `json:"bind,omitempty"`
	Topic           string            `json:"topic,omitempty"`
	TopicPod        string            `json:"topic_pod,omitempty"`
	Seq             *uint64           `json:"seq,omitempty"`
	Exact           bool              `json:"exact,omitempty"`
}
