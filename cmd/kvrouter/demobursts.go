package main

import (
	"fmt"
	"math/rand/v2"
)

// Sibling bursts in the demo's slice: every --burst-every trace requests,
// --burst-size requests sharing a fresh --burst-prefix-token prefix (each
// with a short suffix of its own) follow one another — RL rollouts of one
// prompt, best-of-N samples, an agent's fan-out over one context. The
// clients send them back to back, so they reach kvrouter within a few
// milliseconds, while the first one's prefill (and with it its KV events)
// is still running: routed from the index alone the siblings see no
// worker holding the prefix and spread; predict-on-route keeps them on
// the first one's worker. The bench's gen:burst workload
// (bench/loadgen/burst.go) is the measured version of the same shape.

// demoBursts shapes the bursts mixed into the demo's slice.
type demoBursts struct {
	every, size, prefix int
}

// burstSuffix is each sibling's own tokens after the shared prefix.
const burstSuffix = 32

// burstVocab bounds the bursts' token ids (the trace expansion's default
// vocabulary, bench/simengine.TraceConfig).
const burstVocab = 151936

func (b demoBursts) check() error {
	switch {
	case b.every < 0:
		return fmt.Errorf("--burst-every %d: want 0 (no bursts) or more", b.every)
	case b.every > 0 && (b.size < 2 || b.size > 256):
		return fmt.Errorf("--burst-size %d: want 2 to 256 siblings", b.size)
	case b.every > 0 && (b.prefix < 1 || b.prefix > 1<<16):
		return fmt.Errorf("--burst-prefix %d: want 1 to %d tokens", b.prefix, 1<<16)
	}
	return nil
}

// mix returns the trace prompts with a burst after every b.every of them
// (none when b.every is 0) and each burst's indices in the result, in
// sending order. Deterministic in seed.
func (b demoBursts) mix(trace [][]uint32, seed uint64) (prompts [][]uint32, groups [][]int) {
	if b.every == 0 {
		return trace, nil
	}
	for i, p := range trace {
		prompts = append(prompts, p)
		if (i+1)%b.every != 0 {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(len(groups))))
		prefix := burstTokens(rng, b.prefix)
		var g []int
		for range b.size {
			g = append(g, len(prompts))
			prompts = append(prompts, append(prefix[:len(prefix):len(prefix)], burstTokens(rng, burstSuffix)...))
		}
		groups = append(groups, g)
	}
	return prompts, groups
}

func burstTokens(rng *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = rng.Uint32N(burstVocab)
	}
	return out
}

// siblingFigures is how a routing kept the bursts together: the share of
// siblings (after each group's first) on their group's first one's
// engine, and the siblings' prefix hit rate.
type siblingFigures struct {
	together, hitRate float64
}

// siblings computes the figures of t's requests (nothing without groups).
func siblings(groups [][]int, t *demoTally) siblingFigures {
	var followers, together, prompt, cached int
	for _, g := range groups {
		first := t.per[g[0]]
		for _, i := range g[1:] {
			followers++
			if t.per[i].engine == first.engine {
				together++
			}
		}
		for _, i := range g {
			prompt += t.per[i].prompt
			cached += t.per[i].cached
		}
	}
	var f siblingFigures
	if followers > 0 {
		f.together = float64(together) / float64(followers)
	}
	if prompt > 0 {
		f.hitRate = float64(cached) / float64(prompt)
	}
	return f
}
