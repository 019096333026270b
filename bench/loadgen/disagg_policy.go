package loadgen

import (
	"github.com/kvrouter/kvrouter/actors/routing/disagg"
)

// Names of the split deciders of the disaggregated replay.
const (
	NameDisaggKvrouter = "kvrouter"
	NameDisaggDynamo   = "dynamo-conditional"
	NameDisaggLLMD     = "llm-d-prefix"
	NameDisaggAlways   = "always-split"
	NameDisaggNever    = "never-split"
)

// Peers' thresholds (bench/README.md, "Disaggregated replay").
const (
	// DynamoMaxLocalPrefill: Dynamo's conditional disaggregation prefills
	// remotely when prompt − prefix hit on the decode worker exceeds it.
	DynamoMaxLocalPrefill = 1000
	// LLMDNonCachedTokens: llm-d's prefix-based decider splits when the
	// prompt and its part the decode endpoint does not hold both reach it
	// (the value of its documented example; its default 0 disables it).
	LLMDNonCachedTokens = 512
)

// decideKvrouter is kvrouter's decision: disagg.Decide, the pure core the
// route path calls, with cfg.
type decideKvrouter struct {
	name string
	cfg  disagg.Config
}

func (d decideKvrouter) Name() string { return d.name }

func (d decideKvrouter) Decide(v DisaggView) (bool, int) {
	out := disagg.Decide(d.cfg, disagg.Request{ISL: int64(v.Tokens), BlockSize: int64(v.BlockSize)},
		disagg.Decode{Key: coreKey(0), CachedTokens: int64(v.DecodeCached)}, prefillCandidates(v))
	return out.Split, int(out.Prefill.Worker) - 1
}

// prefillCandidates is the prefill pool of v as disagg.Decide reads it.
func prefillCandidates(v DisaggView) []disagg.Prefill {
	out := make([]disagg.Prefill, len(v.PrefillCached))
	for w := range out {
		out[w] = disagg.Prefill{Key: coreKey(w), OverlapBlocks: uint32(v.PrefillCached[w] / v.BlockSize), QueuedTokens: v.PrefillQueued[w]}
	}
	return out
}

// decideThreshold is a peer's split rule on the decode worker's uncached
// tokens; a split request's prefill worker is the one kvrouter's rule
// picks (disagg.Decide in ModeAlways), so the peers differ from kvrouter
// in the split decision alone.
type decideThreshold struct {
	name  string
	split func(v DisaggView) bool
}

func (d decideThreshold) Name() string { return d.name }

func (d decideThreshold) Decide(v DisaggView) (bool, int) {
	if !d.split(v) {
		return false, -1
	}
	return decideKvrouter{cfg: disagg.Config{Mode: disagg.ModeAlways, MaxDecodeHit: 1}}.Decide(v)
}

// DisaggDeciders are the policies the disaggregated replay compares:
// kvrouter's default decision, Dynamo's and llm-d's rules, always and
// never.
func DisaggDeciders() []DisaggDecider {
	return []DisaggDecider{
		decideKvrouter{name: NameDisaggKvrouter, cfg: disagg.DefaultConfig()},
		decideThreshold{name: NameDisaggDynamo, split: func(v DisaggView) bool {
			return v.Tokens-v.DecodeCached > DynamoMaxLocalPrefill
		}},
		decideThreshold{name: NameDisaggLLMD, split: func(v DisaggView) bool {
			return v.Tokens >= LLMDNonCachedTokens && v.Tokens-v.DecodeCached >= LLMDNonCachedTokens
		}},
		decideKvrouter{name: NameDisaggAlways, cfg: disagg.Config{Mode: disagg.ModeAlways, MaxDecodeHit: 1}},
		decideKvrouter{name: NameDisaggNever, cfg: disagg.Config{Mode: disagg.ModeNever, MaxDecodeHit: 1}},
	}
}
