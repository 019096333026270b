package registry

import (
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/messages"
)

// StreamState is one followed stream as its owner reports it (GET
// /workers on any host).
type StreamState struct {
	Key messages.WorkerKey
	// State is the API's stream state (exact, degraded, recovering).
	State    string
	LastSeq  *uint64
	Warnings []string
	// EngineDetected and EngineEvidence are what the stream's batches
	// showed about its engine (api.RankInfo's).
	EngineDetected, EngineEvidence string
}

// RankLoad is the load one member booked for one (worker, dp_rank): the
// requests it routed and still tracks (routing.RankLoad's sums), and how
// many they are (the cost's request count, behind its cache falloff).
type RankLoad struct {
	Key           messages.WorkerKey
	PrefillTokens int64
	Blocks        int64
	Requests      int64
}

func fromLoads(ls []RankLoad) []*clusterpb.RankLoad {
	out := make([]*clusterpb.RankLoad, len(ls))
	for i, l := range ls {
		out[i] = &clusterpb.RankLoad{Key: clusterpb.FromKey(l.Key), PrefillTokens: l.PrefillTokens, Blocks: l.Blocks, Requests: l.Requests}
	}
	return out
}

// toLoads converts a member's answer, dropping entries without a key or
// with negative sums (a peer's bug must not lower anyone's load).
func toLoads(ps []*clusterpb.RankLoad) []RankLoad {
	var out []RankLoad
	for _, p := range ps {
		if p.GetKey() == nil || p.PrefillTokens < 0 || p.Blocks < 0 || p.Requests < 0 {
			continue
		}
		out = append(out, RankLoad{Key: clusterpb.ToKey(p.Key), PrefillTokens: p.PrefillTokens, Blocks: p.Blocks, Requests: p.Requests})
	}
	return out
}

func fromEntries(es []Entry) []*clusterpb.RegistryEntry {
	out := make([]*clusterpb.RegistryEntry, len(es))
	for i, e := range es {
		w := e.Worker
		out[i] = &clusterpb.RegistryEntry{Key: clusterpb.FromKey(e.Key), Model: w.Model, Tenant: w.Tenant, BlockSize: w.BlockSize,
			Endpoint: w.Endpoint, ReplayEndpoint: w.ReplayEndpoint, Lora: w.Lora, ServingEndpoint: w.ServingEndpoint, Engine: w.Engine,
			MetricsEndpoint: w.MetricsEndpoint, Role: w.Role, BootstrapHost: w.BootstrapHost, BootstrapPort: uint32(w.BootstrapPort),
			Events: w.Events, CacheBlocks: w.CacheBlocks,
			Clock: e.Version.Clock, Origin: e.Version.Origin, Deleted: e.Deleted}
	}
	return out
}

// toEntries converts a peer's entries; an entry without a key is dropped
// (counted by the caller as rejected).
func toEntries(ps []*clusterpb.RegistryEntry) (out []Entry, rejected int) {
	for _, p := range ps {
		if p.GetKey() == nil {
			rejected++
			continue
		}
		out = append(out, Entry{Key: clusterpb.ToKey(p.Key),
			Worker: Worker{Model: p.Model, Tenant: p.Tenant, BlockSize: p.BlockSize, Endpoint: p.Endpoint,
				ReplayEndpoint: p.ReplayEndpoint, Lora: p.Lora, ServingEndpoint: p.ServingEndpoint, Engine: p.Engine,
				MetricsEndpoint: p.MetricsEndpoint, Role: p.Role, BootstrapHost: p.BootstrapHost, BootstrapPort: port16(p.BootstrapPort),
				Events: p.Events, CacheBlocks: p.CacheBlocks},
			Version: Version{Clock: p.Clock, Origin: p.Origin}, Deleted: p.Deleted})
	}
	return out, rejected
}

func fromStates(ss []StreamState) []*clusterpb.StreamState {
	out := make([]*clusterpb.StreamState, len(ss))
	for i, s := range ss {
		out[i] = &clusterpb.StreamState{Key: clusterpb.FromKey(s.Key), State: s.State, Warnings: s.Warnings,
			EngineDetected: s.EngineDetected, EngineEvidence: s.EngineEvidence}
		if s.LastSeq != nil {
			out[i].HasLastSeq, out[i].LastSeq = true, *s.LastSeq
		}
	}
	return out
}

func toStates(ps []*clusterpb.StreamState) []StreamState {
	var out []StreamState
	for _, p := range ps {
		if p.GetKey() == nil {
			continue
		}
		s := StreamState{Key: clusterpb.ToKey(p.Key), State: p.State, Warnings: p.Warnings,
			EngineDetected: p.EngineDetected, EngineEvidence: p.EngineEvidence}
		if p.HasLastSeq {
			seq := p.LastSeq
			s.LastSeq = &seq
		}
		out = append(out, s)
	}
	return out
}

// port16 is a peer's bootstrap port, 0 (none) when out of range.
func port16(p uint32) uint16 {
	if p > 65535 {
		return 0
	}
	return uint16(p)
}
