package httpapi

// The bodies of the selection-service endpoints (selection.go), in the
// shapes of Dynamo's standalone selection service, and their conversion
// to api.SelectRequest.

import (
	"encoding/json"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// defaultName is the reference's default model name and routing group.
const defaultName = "default"

// seqHashList is sequence_hashes: integers as block_hashes takes them.
type seqHashList []messages.LocalHash

var sequenceHashes = intArray{field: "sequence_hashes", want: "a 64-bit integer", allowNeg: true, max: 1<<64 - 1, minBytes: 8}

// UnmarshalJSON implements json.Unmarshaler.
func (h *seqHashList) UnmarshalJSON(b []byte) error { return unmarshalInts(h, b, &sequenceHashes) }

// selectBody is the prompt part the reference's select, select_and_reserve,
// potential_loads and overlap_scores share, with the ids of the first two.
// The reference fields that would change the choice and that kvrouter
// cannot honour are decoded only to be refused (unsupported); the others
// it does not use (priority_jump, expected_output_tokens,
// router_config_override, is_eagle, …) are ignored, as unknown fields are.
type selectBody struct {
	TokenIDs       tokenList   `json:"token_ids"`
	BlockHashes    hashList    `json:"block_hashes"`
	SequenceHashes seqHashList `json:"sequence_hashes"`
	ISLTokens      *uint64     `json:"isl_tokens"`
	ModelName      *string     `json:"model_name"`
	RoutingGroup   *string     `json:"routing_group"`
	TenantID       *string     `json:"tenant_id"` // the reference's former name of routing_group
	LoraName       *string     `json:"lora_name"`
	CacheSalt      *string     `json:"cache_salt"`
	SelectionID    *string     `json:"selection_id"`
	ReservationID  *string     `json:"reservation_id"` // the reference's former name of selection_id
	SessionID      *string     `json:"session_id"`
	SessionContext *struct {
		SessionID *string `json:"session_id"`
	} `json:"session_context"`
	Advisory *bool `json:"advisory"`

	PinnedWorker       json.RawMessage `json:"pinned_worker"`
	AllowedWorkerIDs   json.RawMessage `json:"allowed_worker_ids"`
	AffinityTarget     json.RawMessage `json:"affinity_target"`
	RoutingConstraints json.RawMessage `json:"routing_constraints"`
	MmRoutingInfo      json.RawMessage `json:"mm_routing_info"`
	BlockMmInfos       json.RawMessage `json:"block_mm_infos"`
}

// selection is a decoded selectBody: the Backend's request, and whether
// the client asked for the advisory answer (worker_load).
type selection struct {
	api.SelectRequest
	advisory bool
}

func (b *selectBody) selection(l limits) (selection, *apiError) {
	sel, e := b.names()
	if e != nil {
		return sel, e
	}
	return sel, b.prompt(l, &sel, true)
}

// names converts everything but the prompt: the namespace, the ids, the
// session, and the fields refused.
func (b *selectBody) names() (selection, *apiError) {
	var f fields
	sel := selection{SelectRequest: api.SelectRequest{
		ModelName: f.optName("model_name", b.ModelName),
		TenantID:  f.alias("routing_group", b.RoutingGroup, "tenant_id", b.TenantID),
		LoraName:  f.optName("lora_name", b.LoraName),
		CacheSalt: f.optText("cache_salt", b.CacheSalt),
		SessionID: f.optText("session_id", b.SessionID),
	}}
	if b.SessionContext != nil && b.SessionContext.SessionID != nil { // the structured form wins, as there
		sel.SessionID = f.optText("session_context.session_id", b.SessionContext.SessionID)
	}
	id := f.alias("selection_id", b.SelectionID, "reservation_id", b.ReservationID)
	if f.err != nil {
		return sel, f.err
	}
	for _, u := range []struct {
		name string
		raw  json.RawMessage
	}{{"pinned_worker", b.PinnedWorker}, {"allowed_worker_ids", b.AllowedWorkerIDs}, {"affinity_target", b.AffinityTarget},
		{"routing_constraints", b.RoutingConstraints}, {"mm_routing_info", b.MmRoutingInfo}, {"block_mm_infos", b.BlockMmInfos}} {
		if len(u.raw) > 0 && string(u.raw) != "null" {
			return sel, badRequest(api.ReasonUnsupported, "%s is not supported by kvrouter (it would change the choice); omit it", u.name)
		}
	}
	if sel.ModelName == "" {
		sel.ModelName = defaultName
	}
	if sel.TenantID == "" {
		sel.TenantID = defaultName
	}
	if id != "" {
		if e := checkRequestID(id); e != nil {
			e.msg = "selection_id: " + e.msg
			return sel, e
		}
		sel.SelectionID = id
	}
	if b.Advisory != nil {
		sel.advisory = *b.Advisory
	}
	return sel, nil
}

// prompt converts the prompt: token_ids (which win over hashes, as
// there), or isl_tokens with block_hashes and sequence_hashes of equal
// length — only isl_tokens when !needHashes (a reservation's explicit
// form, as there).
func (b *selectBody) prompt(l limits, sel *selection, needHashes bool) *apiError {
	if b.TokenIDs != nil {
		if e := l.tokens(len(b.TokenIDs)); e != nil {
			return e
		}
		sel.TokenIDs = b.TokenIDs
		return nil
	}
	switch {
	case b.BlockHashes == nil && needHashes:
		return badRequest(api.ReasonMissingField, "block_hashes is required without token_ids")
	case b.SequenceHashes == nil && needHashes:
		return badRequest(api.ReasonMissingField, "sequence_hashes is required without token_ids")
	case b.ISLTokens == nil:
		return badRequest(api.ReasonMissingField, "isl_tokens is required without token_ids")
	case *b.ISLTokens == 0:
		return badRequest(api.ReasonInvalidValue, "isl_tokens must be greater than 0")
	case b.BlockHashes != nil && b.SequenceHashes != nil && len(b.BlockHashes) != len(b.SequenceHashes):
		return badRequest(api.ReasonInvalidValue, "block_hashes length %d must match sequence_hashes length %d",
			len(b.BlockHashes), len(b.SequenceHashes))
	case sel.LoraName != "" || sel.CacheSalt != "":
		return badRequest(api.ReasonInvalidValue, "lora_name and cache_salt apply to token_ids; block_hashes are already namespaced")
	}
	if e := l.hashes(max(len(b.BlockHashes), len(b.SequenceHashes))); e != nil {
		return e
	}
	if *b.ISLTokens > 1<<31 {
		return badRequest(api.ReasonOutOfRange, "isl_tokens %d: at most %d", *b.ISLTokens, 1<<31)
	}
	sel.BlockHashes, sel.ISLTokens = b.BlockHashes, int(*b.ISLTokens)
	return nil
}

// reservationBody is POST /reservations': the ids, and for the explicit
// form the worker and the prompt.
type reservationBody struct {
	selectBody
	WorkerID               *uint64 `json:"worker_id"`
	DpRank                 *uint32 `json:"dp_rank"`
	EffectivePrefillTokens *uint64 `json:"effective_prefill_tokens"`
}

func (b *reservationBody) reservation(l limits) (api.ReserveRequest, *apiError) {
	sel, e := b.names()
	req := api.ReserveRequest{SelectRequest: sel.SelectRequest}
	switch {
	case e != nil:
		return req, e
	case req.SelectionID == "":
		return req, badRequest(api.ReasonMissingField, "selection_id is required")
	case b.WorkerID == nil: // the replay form: the rest is ignored, as there
		return req, nil
	}
	if e := b.prompt(l, &sel, false); e != nil {
		return req, e
	}
	req.SelectRequest, req.Explicit, req.WorkerID = sel.SelectRequest, true, messages.WorkerID(*b.WorkerID)
	if b.DpRank != nil {
		req.DpRank = messages.DpRank(*b.DpRank)
	}
	if p := b.EffectivePrefillTokens; p != nil {
		if *p > 1<<31 {
			return req, badRequest(api.ReasonOutOfRange, "effective_prefill_tokens %d: at most %d", *p, 1<<31)
		}
		req.EffectivePrefillTokens, req.HasEffective = int(*p), true
	}
	return req, nil
}

// alias returns a name field that has a former name: either spelling, or
// both when they agree ("" when absent).
func (f *fields) alias(field string, p *string, former string, q *string) string {
	v, w := f.optName(field, p), f.optName(former, q)
	switch {
	case f.err != nil:
		return ""
	case v != "" && w != "" && v != w:
		f.err = badRequest(api.ReasonInvalidValue, "%s %q and %s %q differ: %s is the former name of %s; send one",
			field, clip(v), former, clip(w), former, field)
		return ""
	case v != "":
		return v
	}
	return w
}

// outputBlockBody is POST /reservations/{id}/output_block's.
type outputBlockBody struct {
	DecayFraction *float64 `json:"decay_fraction"`
}
