package httpapi

// The request bodies, and their conversion to the Backend's requests
// (messages/api) once every field is checked.

import (
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Request bodies as they arrive: pointers tell absent (or null) from zero.

type registerBody struct {
	InstanceID      *uint64 `json:"instance_id"`
	Endpoint        *string `json:"endpoint"`
	ModelName       *string `json:"model_name"`
	TenantID        *string `json:"tenant_id"`
	BlockSize       *uint32 `json:"block_size"`
	DpRank          *uint32 `json:"dp_rank"`
	LoraName        *string `json:"lora_name"`
	ReplayEndpoint  *string `json:"replay_endpoint"`
	ServingEndpoint *string `json:"serving_endpoint"`
	Engine          *string `json:"engine"`
	Events          *string `json:"events"`
	CacheBlocks     *uint32 `json:"cache_blocks"`
	MetricsEndpoint *string `json:"metrics_endpoint"`
	Role            *string `json:"role"`
	BootstrapHost   *string `json:"bootstrap_host"`
	BootstrapPort   *uint16 `json:"bootstrap_port"`
}

type unregisterBody struct {
	InstanceID *uint64 `json:"instance_id"`
	ModelName  *string `json:"model_name"`
	TenantID   *string `json:"tenant_id"`
	DpRank     *uint32 `json:"dp_rank"`
}

type queryBody struct {
	TokenIDs         tokenList `json:"token_ids"`
	ModelName        *string   `json:"model_name"`
	TenantID         *string   `json:"tenant_id"`
	LoraName         *string   `json:"lora_name"`
	CacheSalt        *string   `json:"cache_salt"`
	IncludeInstances *bool     `json:"include_instances"`
}

type queryByHashBody struct {
	BlockHashes      hashList `json:"block_hashes"`
	ModelName        *string  `json:"model_name"`
	TenantID         *string  `json:"tenant_id"`
	IncludeInstances *bool    `json:"include_instances"`
}

type routeBody struct {
	TokenIDs      tokenList `json:"token_ids"`
	BlockHashes   hashList  `json:"block_hashes"`
	ModelName     *string   `json:"model_name"`
	TenantID      *string   `json:"tenant_id"`
	LoraName      *string   `json:"lora_name"`
	CacheSalt     *string   `json:"cache_salt"`
	SessionID     *string   `json:"session_id"`
	RequestID     *string   `json:"request_id"`
	IncludeScores *bool     `json:"include_scores"`
}

// The conversions of the bodies into the Backend's requests all take the
// server's limits (see request); the bodies without lists ignore them.

func (b *registerBody) registration(limits) (api.Registration, *apiError) {
	var f fields
	f.required("instance_id", b.InstanceID != nil)
	events := f.events(b.Events)
	if events == api.EventsNone && (b.Endpoint != nil && *b.Endpoint != "" || b.ReplayEndpoint != nil && *b.ReplayEndpoint != "") && f.err == nil {
		f.err = badRequest(api.ReasonInvalidValue, `events "none": a worker that publishes no events has no endpoint or replay_endpoint`)
	}
	reg := api.Registration{
		Endpoint:        f.endpoint("endpoint", b.Endpoint, events != api.EventsNone),
		ModelName:       f.name("model_name", b.ModelName),
		TenantID:        f.tenant(b.TenantID),
		LoraName:        f.optName("lora_name", b.LoraName),
		ReplayEndpoint:  f.endpoint("replay_endpoint", b.ReplayEndpoint, false),
		ServingEndpoint: f.serving(b.ServingEndpoint),
		Engine:          f.engine(b.Engine),
		MetricsEndpoint: f.metricsURL(b.MetricsEndpoint),
		Role:            f.role(b.Role),
		BootstrapHost:   f.bootstrapHost(b.BootstrapHost),
	}
	if f.err != nil {
		return reg, f.err
	}
	if b.BootstrapPort != nil {
		if *b.BootstrapPort == 0 {
			return reg, badRequest(api.ReasonInvalidValue, "bootstrap_port must be in 1..65535 (omit it when the engine has no bootstrap server)")
		}
		reg.BootstrapPort = *b.BootstrapPort
	}
	reg.InstanceID = messages.WorkerID(*b.InstanceID)
	if b.BlockSize != nil {
		if *b.BlockSize == 0 {
			return reg, badRequest(api.ReasonInvalidValue, "block_size must be positive (omit it for the server's default)")
		}
		reg.BlockSize = *b.BlockSize
	}
	reg.Events = events
	if b.CacheBlocks != nil {
		if events != api.EventsNone || *b.CacheBlocks == 0 {
			return reg, badRequest(api.ReasonInvalidValue, `cache_blocks sizes the approximate cache of a worker registered with events "none" (positive; omit it for the server's default)`)
		}
		reg.CacheBlocks = *b.CacheBlocks
	}
	if b.DpRank != nil {
		reg.DpRank = messages.DpRank(*b.DpRank)
	}
	return reg, nil
}

func (b *unregisterBody) workerRef(limits) (api.WorkerRef, *apiError) {
	var f fields
	f.required("instance_id", b.InstanceID != nil)
	ref := api.WorkerRef{
		ModelName: f.name("model_name", b.ModelName),
		TenantID:  f.optName("tenant_id", b.TenantID), // "" = every tenant
	}
	if f.err != nil {
		return ref, f.err
	}
	ref.InstanceID = messages.WorkerID(*b.InstanceID)
	if b.DpRank != nil {
		r := messages.DpRank(*b.DpRank)
		ref.DpRank = &r
	}
	return ref, nil
}

func (b *queryBody) query(l limits) (api.QueryRequest, *apiError) {
	var f fields
	f.required("token_ids", b.TokenIDs != nil)
	q := api.QueryRequest{
		ModelName: f.name("model_name", b.ModelName),
		TenantID:  f.tenant(b.TenantID),
		LoraName:  f.optName("lora_name", b.LoraName),
		CacheSalt: f.optText("cache_salt", b.CacheSalt),
	}
	f.limit(l.tokens(len(b.TokenIDs)))
	q.TokenIDs = b.TokenIDs
	q.IncludeInstances = b.IncludeInstances != nil && *b.IncludeInstances
	return q, f.err
}

func (b *queryByHashBody) query(l limits) (api.QueryByHashRequest, *apiError) {
	var f fields
	f.required("block_hashes", b.BlockHashes != nil)
	q := api.QueryByHashRequest{
		ModelName: f.name("model_name", b.ModelName),
		TenantID:  f.tenant(b.TenantID),
	}
	f.limit(l.hashes(len(b.BlockHashes)))
	q.BlockHashes = b.BlockHashes
	q.IncludeInstances = b.IncludeInstances != nil && *b.IncludeInstances
	return q, f.err
}

func (b *routeBody) route(l limits) (api.RouteRequest, *apiError) {
	var f fields
	req := api.RouteRequest{
		ModelName: f.name("model_name", b.ModelName),
		TenantID:  f.tenant(b.TenantID),
		LoraName:  f.optName("lora_name", b.LoraName),
		CacheSalt: f.optText("cache_salt", b.CacheSalt),
		SessionID: f.optText("session_id", b.SessionID),
		RequestID: f.optName("request_id", b.RequestID),
	}
	if f.err != nil {
		return req, f.err
	}
	switch {
	case b.TokenIDs == nil && b.BlockHashes == nil:
		return req, badRequest(api.ReasonMissingField, "one of token_ids and block_hashes is required")
	case b.TokenIDs != nil && b.BlockHashes != nil:
		return req, badRequest(api.ReasonInvalidValue, "token_ids and block_hashes are exclusive: send one")
	case b.BlockHashes != nil && (req.LoraName != "" || req.CacheSalt != ""):
		return req, badRequest(api.ReasonInvalidValue, "lora_name and cache_salt apply to token_ids; block_hashes are already namespaced")
	}
	if req.RequestID != "" {
		if e := checkRequestID(req.RequestID); e != nil {
			return req, e
		}
	}
	if b.TokenIDs != nil {
		if e := l.tokens(len(b.TokenIDs)); e != nil {
			return req, e
		}
		req.TokenIDs = b.TokenIDs
	} else {
		if e := l.hashes(len(b.BlockHashes)); e != nil {
			return req, e
		}
		req.BlockHashes = b.BlockHashes
	}
	if b.IncludeScores != nil {
		req.IncludeScores = *b.IncludeScores
	}
	return req, nil
}
