package service

// Storage tiers in the cost: a cached block on the host's memory or on
// disk saves a prefill too, but loading it back costs time a block in GPU
// memory does not, so the route path credits a worker's overlap by the
// tier holding each block (the fastest tier holding it, as the index
// splits a match: radix.Score.Tiers). The physical overlap is what /route
// reports; the weighted one is what the cost scores.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// TierWeights is the share of a cached block's worth the cost credits,
// per messages.StorageTier (device, host, disk, external), each in [0, 1].
type TierWeights [4]float64

// DefaultTierWeights: a block in GPU memory is worth a whole block, one
// in host memory three quarters, one on disk or in an external store a
// quarter.
var DefaultTierWeights = TierWeights{1, 0.75, 0.25, 0.25}

// ParseTierWeights reads "host=0.5,disk=0.1" (tier names as
// messages.StorageTier prints them; tiers not named keep their default).
func ParseTierWeights(s string) (TierWeights, error) {
	w := DefaultTierWeights
	if strings.TrimSpace(s) == "" {
		return w, nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return w, fmt.Errorf("tier weight %q: want TIER=WEIGHT", kv)
		}
		t := -1
		for i := range w {
			if messages.StorageTier(i).String() == name {
				t = i
			}
		}
		if t < 0 {
			return w, fmt.Errorf("tier weight %q: unknown tier %q (device, host, disk, external)", kv, name)
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return w, fmt.Errorf("tier weight %q: the weight must be a number in [0, 1]", kv)
		}
		w[t] = f
	}
	return w, nil
}

// weighted is a match's overlap as the cost credits it: each tier's
// blocks times its weight, rounded down (a match without a tier split
// counts as device).
func (w TierWeights) weighted(sc radix.Score) uint32 {
	if sc.Tiers == [4]uint32{} {
		return sc.Blocks
	}
	var sum float64
	for t, n := range sc.Tiers {
		sum += float64(n) * w[t]
	}
	return min(uint32(sum), sc.Blocks)
}

// String is the weights in ParseTierWeights' form.
func (w TierWeights) String() string {
	parts := make([]string, len(w))
	for t, f := range w {
		parts[t] = messages.StorageTier(t).String() + "=" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}
