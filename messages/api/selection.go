package api

import (
	"context"

	"github.com/kvrouter/kvrouter/messages"
)

// Selector is the part of a Backend that answers Dynamo's standalone
// selection service (actors/frontend/httpapi, selection*.go): a Backend
// that implements it serves /select, /select_and_reserve,
// /reservations/{id}/…, /loads, /potential_loads and /overlap_scores.
// prefill_complete and DELETE of a reservation are Backend.PrefillDone and
// Backend.Free: a reservation is a routed request's booking. Errors follow
// Backend's rules.
type Selector interface {
	// Select picks the (worker, dp_rank) for a request. With Book it
	// books the request's load under SelectionID as Route does (a
	// duplicate id → ErrConflict); without, it only answers (advisory).
	Select(ctx context.Context, req SelectRequest) (SelectResult, error)
	// OutputBlock adds one generated block to a booked request's decode
	// load; Decay in [0, 1] re-weights all its blocks (HasDecay false: no
	// re-weighting). An unknown id → ErrNotFound.
	OutputBlock(ctx context.Context, req OutputBlockRequest) error
	// Loads answers every namespace's booked load per (worker, dp_rank),
	// filtered by model and tenant ("" matches any).
	Loads(ctx context.Context, filter LoadsFilter) ([]NamespaceLoads, error)
	// PotentialLoads answers each candidate's load if the request went
	// there, without choosing or booking.
	PotentialLoads(ctx context.Context, req SelectRequest) ([]PotentialLoad, error)
	// OverlapScores answers each candidate's prefix match through the
	// storage tiers.
	OverlapScores(ctx context.Context, req SelectRequest) (OverlapScores, error)
	// Reserve books a request after an advisory Select (POST
	// /reservations): the selection an advisory Select made under the same
	// id in the same namespace, or the explicit worker and prompt. No
	// pending selection, or a rank that is not registered → ErrNotFound;
	// an id already booked → ErrConflict.
	Reserve(ctx context.Context, req ReserveRequest) (ReserveResult, error)
}

// ReserveRequest is POST /reservations. Without Explicit it books the
// pending selection of SelectionID (the reference's replay form: the
// prompt is not sent again). With Explicit it books the prompt on
// (WorkerID, DpRank): its prefill load is EffectivePrefillTokens when
// HasEffective (at most the prompt's length), else the prompt's tokens
// the index does not hold there.
type ReserveRequest struct {
	SelectRequest
	Explicit               bool              `json:"explicit,omitempty"`
	WorkerID               messages.WorkerID `json:"worker_id,omitempty"`
	DpRank                 messages.DpRank   `json:"dp_rank,omitempty"`
	EffectivePrefillTokens int               `json:"effective_prefill_tokens,omitempty"`
	HasEffective           bool              `json:"has_effective,omitempty"`
}

// ReserveResult is POST /reservations' answer in the reference's shape.
type ReserveResult struct {
	SelectionID  string            `json:"selection_id"`
	ModelName    string            `json:"model_name"`
	RoutingGroup string            `json:"routing_group"`
	WorkerID     messages.WorkerID `json:"worker_id"`
	DpRank       messages.DpRank   `json:"dp_rank"`
	Endpoint     string            `json:"endpoint"`
}

// SelectRequest is a selection-service request: exactly one of TokenIDs
// and BlockHashes (then ISLTokens, the prompt's length, is required: the
// hashes alone do not say how full the last block is). LoraName and
// CacheSalt apply to TokenIDs. SessionID is a hint for the router, as on
// /route. SelectionID names the booking (Book) or only echoes back
// (advisory); Book asks Select to book.
type SelectRequest struct {
	TokenIDs    []uint32             `json:"token_ids,omitempty"`
	BlockHashes []messages.LocalHash `json:"block_hashes,omitempty"`
	ISLTokens   int                  `json:"isl_tokens,omitempty"`
	ModelName   string               `json:"model_name"`
	TenantID    string               `json:"tenant_id"`
	LoraName    string               `json:"lora_name,omitempty"`
	CacheSalt   string               `json:"cache_salt,omitempty"`
	SessionID   string               `json:"session_id,omitempty"`
	SelectionID string               `json:"selection_id,omitempty"`
	Book        bool                 `json:"book,omitempty"`
}

// TierReach is one (worker)'s match through the storage tiers, in tokens,
// the shape of the Mooncake KV-indexer RFC: GPU the prefix held on device,
// CPU on device or host, Disk on any tier (so GPU ≤ CPU ≤ Disk),
// LongestMatched their maximum, DP each dp rank's device prefix (keys:
// decimal dp ranks).
type TierReach struct {
	LongestMatched uint64            `json:"longest_matched"`
	GPU            uint64            `json:"gpu"`
	DP             map[string]uint64 `json:"dp"`
	CPU            uint64            `json:"cpu"`
	Disk           uint64            `json:"disk"`
}

// SelectResult is the answer of /select and /select_and_reserve in the
// reference's shape. RoutingGroup is the tenant. Endpoint is the chosen
// rank's registered serving endpoint ("" when none). Overlap is the chosen
// worker's reach (its DP holds every rank of the worker the index
// scored, the chosen one always). EffectivePrefillTokens is what the
// request adds to the rank's prefill load (isl − cached tokens);
// PotentialDecodeBlocks the rank's active blocks with the request's own.
// WorkerLoad (advisory only) is the rank's load with the request.
type SelectResult struct {
	SelectionID            string            `json:"selection_id,omitempty"`
	ModelName              string            `json:"model_name"`
	RoutingGroup           string            `json:"routing_group"`
	WorkerID               messages.WorkerID `json:"worker_id"`
	DpRank                 messages.DpRank   `json:"dp_rank"`
	Endpoint               string            `json:"endpoint"`
	BlockSize              uint32            `json:"block_size"`
	Overlap                TierReach         `json:"overlap"`
	EffectivePrefillTokens uint64            `json:"effective_prefill_tokens"`
	PotentialDecodeBlocks  uint64            `json:"potential_decode_blocks"`
	WorkerLoad             *WorkerLoad       `json:"worker_load,omitempty"`
}

// WorkerLoad is a rank's load as an advisory selection projects it.
// PrefillTokenCapacity is 0: kvrouter is not told an engine's batch size.
type WorkerLoad struct {
	ActivePrefillTokens  uint64 `json:"active_prefill_tokens"`
	PrefillTokenCapacity uint64 `json:"prefill_token_capacity"`
}

// OutputBlockRequest is POST /reservations/{id}/output_block.
type OutputBlockRequest struct {
	ID       string  `json:"id"`
	Decay    float64 `json:"decay_fraction,omitempty"`
	HasDecay bool    `json:"has_decay,omitempty"`
}

// LoadsFilter selects the namespaces of GET /loads ("": any).
type LoadsFilter struct {
	ModelName string `json:"model_name,omitempty"`
	TenantID  string `json:"tenant_id,omitempty"`
}

// NamespaceLoads is one namespace's element of GET /loads, in the
// reference's shape. kvrouter has no admission queue, so PendingCount and
// PendingISLTokens are always 0.
type NamespaceLoads struct {
	ModelName        string          `json:"model_name"`
	RoutingGroup     string          `json:"routing_group"`
	Loads            []PotentialLoad `json:"loads"`
	PendingCount     int             `json:"pending_count"`
	PendingISLTokens int             `json:"pending_isl_tokens"`
}

// PotentialLoad is one rank's load: booked (GET /loads) or with the
// request added (POST /potential_loads). ActiveRequests counts the rank's
// tracked requests.
type PotentialLoad struct {
	WorkerID               messages.WorkerID `json:"worker_id"`
	DpRank                 messages.DpRank   `json:"dp_rank"`
	PotentialPrefillTokens uint64            `json:"potential_prefill_tokens"`
	PotentialDecodeBlocks  uint64            `json:"potential_decode_blocks"`
	ActiveRequests         uint64            `json:"active_requests"`
}

// OverlapScores is the answer of POST /overlap_scores in the reference's
// shape: per candidate (worker, dp_rank), its prefix in blocks on device,
// through host and through disk (cumulative), the extensions host and
// disk add, and the blocks the router credits (kvrouter weighs every tier
// alike: the whole prefix). SharedBeyondDeviceBlocks is always null and
// SharedCache disabled: kvrouter has no shared cache tier.
type OverlapScores struct {
	BlockSize   uint32             `json:"block_size"`
	NumBlocks   int                `json:"num_blocks"`
	Workers     []WorkerOverlap    `json:"workers"`
	SharedCache SharedCacheOverlap `json:"shared_cache"`
}

// WorkerOverlap is one candidate's row of OverlapScores.
type WorkerOverlap struct {
	WorkerID                  messages.WorkerID `json:"worker_id"`
	DpRank                    messages.DpRank   `json:"dp_rank"`
	DeviceBlocks              uint32            `json:"device_blocks"`
	HostPinnedBlocks          uint32            `json:"host_pinned_blocks"`
	DiskBlocks                uint32            `json:"disk_blocks"`
	HostPinnedExtensionBlocks uint32            `json:"host_pinned_extension_blocks"`
	DiskExtensionBlocks       uint32            `json:"disk_extension_blocks"`
	SharedBeyondDeviceBlocks  *uint32           `json:"shared_beyond_device_blocks"`
	RouterCreditBlocks        float64           `json:"router_credit_blocks"`
}

// SharedCacheOverlap is the reference's shared-cache part of
// OverlapScores; kvrouter's is always disabled and empty.
type SharedCacheOverlap struct {
	Enabled        bool        `json:"enabled"`
	TotalHitBlocks uint32      `json:"total_hit_blocks"`
	Ranges         [][2]uint32 `json:"ranges"`
	Error          *string     `json:"error"`
}
