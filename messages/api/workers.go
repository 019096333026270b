// What GET /workers shows of each registered worker and rank: stream
// state, mode, engine signals, health, breaker and prediction checks.

package api

import "github.com/kvrouter/kvrouter/messages"

// StreamState says how far the index can be trusted for one (worker,
// dp_rank) stream.
type StreamState string

// Stream states (actors/listener/README.md, "Resyncs and the stream's state").
const (
	// StateExact: the history is complete from an empty cache.
	StateExact StreamState = "exact"
	// StateRecovering: catching up (replay, bootstrap) — sequence not yet
	// lined up with the live stream.
	StateRecovering StreamState = "recovering"
	// StateDegraded: history was lost; the index holds only what arrived
	// since, so the worker may hold blocks the index does not know.
	StateDegraded StreamState = "degraded"
	// StateApproximate: an event-less worker (Registration.Events
	// EventsNone): the router's view is its own predictions, which may
	// miss blocks the engine holds and hold blocks it evicted.
	StateApproximate StreamState = "approximate"
)

// RankInfo.Mode values.
const (
	ModeEvents      = "events"
	ModePredictions = "predictions"
)

// WorkerInfo is one element of GET /workers. InstanceID and Endpoints are the
// reference's shape (Endpoints maps each dp rank to its endpoint; the server
// fills it from Ranks when the Backend leaves it nil); Ranks is kvrouter's
// detail per rank.
type WorkerInfo struct {
	InstanceID messages.WorkerID          `json:"instance_id"`
	Endpoints  map[messages.DpRank]string `json:"endpoints"`
	Ranks      []RankInfo                 `json:"ranks"`
}

// RankInfo is the state of one registered (worker, dp_rank) stream.
//
// LastSeq is the last publisher sequence number delivered (nil: no event
// yet); LagSeconds the age of the newest applied batch; Blocks the blocks
// the index holds for the rank. Warnings are short, stable, human-readable
// strings such as "no events yet" or "block size mismatch" — the guardrails
// that a worker is not silently scored zero.
//
// Engine is the registration's engine choice (auto or an engine);
// EngineDetected the engine the stream's batches show ("" before its first
// batch, or while they fit several engines), EngineEvidence what they
// showed. A stream that contradicts an explicit engine has a warning
// saying so.
type RankInfo struct {
	DpRank         messages.DpRank `json:"dp_rank"`
	ModelName      string          `json:"model_name"`
	TenantID       string          `json:"tenant_id"`
	Endpoint       string          `json:"endpoint"`
	ReplayEndpoint string          `json:"replay_endpoint,omitempty"`
	// ServingEndpoint is the registration's (absent when none).
	ServingEndpoint string      `json:"serving_endpoint,omitempty"`
	LoraName        string      `json:"lora_name,omitempty"`
	Engine          string      `json:"engine,omitempty"`
	EngineDetected  string      `json:"engine_detected,omitempty"`
	EngineEvidence  string      `json:"engine_evidence,omitempty"`
	BlockSize       uint32      `json:"block_size"`
	State           StreamState `json:"state"`
	LastSeq         *uint64     `json:"last_seq"`
	LagSeconds      float64     `json:"lag_seconds"`
	Blocks          uint64      `json:"blocks"`
	// Mode is how the router knows the rank's cache: ModeEvents (its KV
	// events; Blocks is the index's) or ModePredictions (an event-less
	// worker: Blocks is what the router predicts from its own decisions,
	// at most CacheBlocks).
	Mode        string `json:"mode,omitempty"`
	CacheBlocks uint32 `json:"cache_blocks,omitempty"`
	// Role is the rank's role in a disaggregated fleet (RolePrefill,
	// RoleDecode or RoleBoth); BootstrapHost and BootstrapPort its
	// registered SGLang bootstrap address (absent when none).
	Role          string `json:"role,omitempty"`
	BootstrapHost string `json:"bootstrap_host,omitempty"`
	BootstrapPort uint16 `json:"bootstrap_port,omitempty"`
	// TopicPod is the registration's: the pod its events carry in their
	// topic on a socket shared by topic (absent otherwise).
	TopicPod string   `json:"topic_pod,omitempty"`
	Warnings []string `json:"warnings"`
	// Owner is the cluster member (its cluster address) whose listener
	// follows the stream; absent outside a cluster.
	Owner string `json:"owner,omitempty"`
	// Signals is what the rank's engine reports on its metrics endpoint
	// (absent when engine signals are off or the rank has no endpoint
	// to scrape).
	Signals *EngineSignals `json:"signals,omitempty"`
	// Breaker is the circuit breaker of the rank's serving endpoint on
	// this router host (absent when breakers are off or it has no
	// serving endpoint).
	Breaker *BreakerInfo `json:"breaker,omitempty"`
	// Health is the active health check of the rank's serving endpoint
	// on this router host (absent when health checks are off, before the
	// first check, or without a serving endpoint).
	Health *HealthInfo `json:"health,omitempty"`
	// HitCheck is the check of the router's predicted cache hits on the
	// rank against what its engine reported for the requests this router
	// host relayed (absent before the first report).
	HitCheck *HitCheckInfo `json:"hit_check,omitempty"`
}

// HitCheckInfo is a rank's prediction check in GET /workers
// (actors/routing/hitcheck): the requests whose engine reported its
// cached tokens, the cached tokens predicted and reported for them,
// the reported/predicted ratio over the recent window (absent until it
// has enough predicted tokens to judge), whether the rank is flagged (its
// reports stay far below the predictions: its events are probably lost,
// or its hashing does not match) and the share of its overlap the cost
// credits meanwhile.
type HitCheckInfo struct {
	Reports         uint64   `json:"reports"`
	PredictedTokens uint64   `json:"predicted_tokens"`
	ReportedTokens  uint64   `json:"reported_tokens"`
	WindowRatio     *float64 `json:"window_ratio,omitempty"`
	Flagged         bool     `json:"flagged"`
	Credit          float64  `json:"credit"`
}

// HealthInfo is a serving endpoint's active health check in GET
// /workers: whether it gets requests, the consecutive failed and passed
// checks, the checks made and failed, and the last failure's reason.
type HealthInfo struct {
	Healthy             bool   `json:"healthy"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	ConsecutivePasses   int    `json:"consecutive_passes"`
	Checks              uint64 `json:"checks"`
	Failed              uint64 `json:"failed"`
	LastError           string `json:"last_error,omitempty"`
}

// BreakerInfo is a serving endpoint's circuit breaker in GET /workers:
// its state (closed, open, half_open), the consecutive failures counted
// while closed, the answers that succeeded and failed over its window,
// when an open one half-opens, and the probes out and passed while
// half-open.
type BreakerInfo struct {
	State        string `json:"state"`
	Consecutive  int    `json:"consecutive_failures"`
	Good         uint64 `json:"window_ok"`
	Bad          uint64 `json:"window_failed"`
	HalfOpensAt  string `json:"half_opens_at,omitempty"`
	ProbesOut    int    `json:"probes_out,omitempty"`
	ProbesPassed int    `json:"probes_passed,omitempty"`
}

// EngineSignals is one rank's engine-reported load in GET /workers
// (actors/enginesignals): the scraped URL and engine names, the latest
// values (absent before the first successful scrape; kv_usage_metric is
// the gauge it came from), the scrapes that succeeded and failed (by
// reason), the times its signals went stale, whether it is saturated now
// (and why: queue, kv_usage, stale), and the outside load the cost adds
// to what the router booked — OutsideTraffic is set when the engine
// reports far more requests than the router booked on it (traffic that
// did not pass this router).
type EngineSignals struct {
	URL             string            `json:"url"`
	Engine          string            `json:"engine,omitempty"`
	Waiting         *float64          `json:"waiting,omitempty"`
	Running         *float64          `json:"running,omitempty"`
	KVUsage         *float64          `json:"kv_usage,omitempty"`
	KVUsageMetric   string            `json:"kv_usage_metric,omitempty"`
	TotalBlocks     int64             `json:"total_blocks,omitempty"`
	RunningAdapters []string          `json:"running_lora_adapters,omitempty"`
	MaxLora         int               `json:"max_lora,omitempty"`
	AgeSeconds      *float64          `json:"age_seconds,omitempty"`
	Scrapes         uint64            `json:"scrapes"`
	Failures        map[string]uint64 `json:"failures,omitempty"`
	LastError       string            `json:"last_error,omitempty"`
	StaleEvents     uint64            `json:"stale_events"`
	Saturated       string            `json:"saturated,omitempty"`
	OutsideRequests int64             `json:"outside_requests"`
	OutsideBlocks   int64             `json:"outside_blocks"`
	BookedRequests  int64             `json:"booked_requests"`
	OutsideTraffic  bool              `json:"outside_traffic,omitempty"`
}
