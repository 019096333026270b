package api

import "github.com/kvrouter/kvrouter/messages"

// Registration.Role values: what a serving endpoint does in a
// prefill/decode disaggregated fleet. A registration without a role
// (stored as "") does both, as every worker did before roles existed.
const (
	// RoleBoth: prefill and decode on the same engine (the default).
	RoleBoth = "both"
	// RolePrefill: a prefill-only engine; it computes a prompt's KV cache
	// and hands it to a decode engine.
	RolePrefill = "prefill"
	// RoleDecode: a decode engine; it receives the KV cache of a remote
	// prefill (or prefills locally when the router does not split).
	RoleDecode = "decode"
)

// ValidRole reports whether r is a Registration.Role kvrouter knows
// ("" included: RoleBoth).
func ValidRole(r string) bool {
	switch r {
	case "", RoleBoth, RolePrefill, RoleDecode:
		return true
	}
	return false
}

// RoleOf is r's role with the default applied: RoleBoth for "".
func RoleOf(r string) string {
	if r == "" {
		return RoleBoth
	}
	return r
}

// PrefillLeg is the prefill half of a split /route answer: the prefill
// (worker, dp_rank) chosen for the request, its overlap, its registered
// serving endpoint, and (SGLang) the bootstrap address its KV transfer
// listens on. Its prefill load is booked under the route's request id and
// freed by prefill_done (the decode leg's first byte).
type PrefillLeg struct {
	WorkerID        messages.WorkerID `json:"worker_id"`
	DpRank          messages.DpRank   `json:"dp_rank"`
	OverlapBlocks   uint32            `json:"overlap_blocks"`
	CachedTokens    uint64            `json:"cached_tokens"`
	ServingEndpoint string            `json:"serving_endpoint,omitempty"`
	BootstrapHost   string            `json:"bootstrap_host,omitempty"`
	BootstrapPort   uint16            `json:"bootstrap_port,omitempty"`
}

// Disaggregation is why a /route answer was split into a remote prefill
// and a decode leg, or not: Split tells which, Reason says why in a
// stable, machine-readable word (DisaggReason*), Detail in prose.
type Disaggregation struct {
	Split  bool   `json:"split"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Disaggregation.Reason values.
const (
	// DisaggNoPrefillPool: the namespace has no registered prefill worker
	// that can take the request; the decode worker prefills locally.
	DisaggNoPrefillPool = "no_prefill_pool"
	// DisaggNever: disaggregation is configured off.
	DisaggNever = "never"
	// DisaggAlways: disaggregation is configured to split every request.
	DisaggAlways = "always"
	// DisaggWarmDecode: the chosen decode worker already holds enough of
	// the prompt that a remote prefill does not pay.
	DisaggWarmDecode = "warm_decode"
	// DisaggShortUncached: the part of the prompt the decode worker does
	// not hold is too short for a remote prefill to pay.
	DisaggShortUncached = "short_uncached"
	// DisaggUncached: the uncached part is long enough; the request is
	// split.
	DisaggUncached = "uncached"
)
