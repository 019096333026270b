package loadgen

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// BurstTrace is the reference of the generated burst workload
// (kvrouter-bench --trace gen:burst).
const BurstTrace = GeneratedPrefix + "burst"

// BurstConfig shapes the burst workload: sibling groups — several requests
// sharing one long prefix, fired within a few milliseconds (RL rollouts of
// one prompt, best-of-N, an agent's fan-out over one context) — mixed with
// ordinary multi-turn traffic (the agentic generator's sessions).
type BurstConfig struct {
	Requests int    // requests to generate
	Seed     uint64 // the same seed gives the same requests
	// GroupShare is the share of requests that belong to sibling groups.
	GroupShare float64
	// GroupMin, GroupMax bound a group's siblings.
	GroupMin, GroupMax int
	// PrefixMin, PrefixMax bound a group's shared prefix, in tokens; each
	// sibling adds SuffixMin..SuffixMax tokens of its own.
	PrefixMin, PrefixMax int
	SuffixMin, SuffixMax int
	// SiblingGap bounds the time between two siblings' arrivals (each is
	// drawn uniformly in (0, SiblingGap]).
	SiblingGap time.Duration
	// Ordinary is the multi-turn traffic between the groups (its Requests
	// and Seed are set from these).
	Ordinary AgenticConfig
}

// DefaultBurst is the burst workload kvrouter-bench reports: 12,000
// requests, half of them in groups of 2–32 siblings sharing a fresh prefix
// of 2,048–8,192 tokens (each sibling adds 16–256 tokens), siblings at most
// 5 ms apart; the other half the agentic workload's sessions.
func DefaultBurst() BurstConfig {
	return BurstConfig{Requests: 12000, Seed: 1, GroupShare: 0.5, GroupMin: 2, GroupMax: 32,
		PrefixMin: 2048, PrefixMax: 8192, SuffixMin: 16, SuffixMax: 256, SiblingGap: 5 * time.Millisecond,
		Ordinary: DefaultAgentic()}
}

// GenerateBurst returns cfg's requests, deterministic in cfg. A group's
// first request arrives on the engine model's clock (Follows 0) and each
// further sibling Follows its predecessor; each sibling is a session of
// its own ("g<group>-<k>"; ordinary sessions keep the agentic "a<n>").
// Groups start where an ordinary request would, with the probability that
// makes GroupShare of the requests siblings; the last group is cut at
// cfg.Requests.
func GenerateBurst(cfg BurstConfig) []Request {
	oc := cfg.Ordinary
	oc.Requests, oc.Seed = cfg.Requests, cfg.Seed
	ordinary := GenerateAgentic(oc)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x62757273))
	meanGroup := float64(cfg.GroupMin+cfg.GroupMax) / 2
	share := min(max(cfg.GroupShare, 0), 1)
	// a start per slot with probability p gives groups × mean / (groups ×
	// mean + ordinary) = share when p / (1 − p) = share / ((1 − share) × mean)
	p := 1.0
	if share < 1 {
		x := share / ((1 - share) * meanGroup)
		p = x / (1 + x)
	}
	out := make([]Request, 0, cfg.Requests)
	next, group := 0, 0
	for len(out) < cfg.Requests {
		if share == 0 || rng.Float64() >= p {
			r := ordinary[next]
			r.At = 0
			out = append(out, r)
			next++
			continue
		}
		gr := rand.New(rand.NewPCG(cfg.Seed, uint64(group)<<1|1))
		prefix := tokenRun(gr, cfg.PrefixMin+gr.IntN(cfg.PrefixMax-cfg.PrefixMin+1))
		n := cfg.GroupMin + gr.IntN(cfg.GroupMax-cfg.GroupMin+1)
		for k := 0; k < n && len(out) < cfg.Requests; k++ {
			tokens := append(prefix[:len(prefix):len(prefix)], tokenRun(gr, cfg.SuffixMin+gr.IntN(cfg.SuffixMax-cfg.SuffixMin+1))...)
			r := Request{Tokens: tokens, Session: "g" + strconv.Itoa(group) + "-" + strconv.Itoa(k)}
			if k > 0 {
				r.Follows = time.Duration(1 + gr.Int64N(int64(cfg.SiblingGap)))
			}
			out = append(out, r)
		}
		group++
	}
	return out
}

// ArrivalTimes is each request's arrival in the engine model, in seconds,
// for a workload whose requests say when they follow their predecessor
// (Request.Follows: burst siblings); nil when none does (every request
// arrives gap after the previous one). The others are spaced evenly so the
// whole replay spans len(reqs) × gap — the offered load ArrivalGap set.
func ArrivalTimes(reqs []Request, gap float64) []float64 {
	var follows float64
	onClock := 0
	for _, r := range reqs {
		if r.Follows > 0 {
			follows += r.Follows.Seconds()
		} else {
			onClock++
		}
	}
	if onClock == len(reqs) {
		return nil
	}
	step := 0.0
	if onClock > 1 {
		step = max(0, float64(len(reqs))*gap-follows) / float64(onClock-1)
	}
	out := make([]float64, len(reqs))
	for i, r := range reqs {
		if i == 0 {
			continue
		}
		if r.Follows > 0 {
			out[i] = out[i-1] + r.Follows.Seconds()
		} else {
			out[i] = out[i-1] + step
		}
	}
	return out
}
