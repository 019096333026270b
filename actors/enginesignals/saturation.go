package enginesignals

import (
	"fmt"
	"math"
)

// Thresholds define saturation (README.md, "Saturation").
type Thresholds struct {
	// Queue: a rank with more requests waiting than this is saturated
	// (default DefaultQueueThreshold).
	Queue float64
	// KVUsage: a rank whose KV cache is in use above this share is
	// saturated (default DefaultKVUsageThreshold).
	KVUsage float64
}

// Saturation defaults: the Gateway API Inference Extension's reference
// detector's, so a pool behind either sheds at the same point.
const (
	DefaultQueueThreshold   = 5
	DefaultKVUsageThreshold = 0.8
)

// Why a rank is saturated (Saturation's answer; "" when it is not).
const (
	SaturatedQueue = "queue"
	SaturatedKV    = "kv_usage"
	SaturatedStale = "stale"
)

// WithDefaults returns t with zero fields set to the defaults.
func (t Thresholds) WithDefaults() Thresholds {
	if t.Queue == 0 {
		t.Queue = DefaultQueueThreshold
	}
	if t.KVUsage == 0 {
		t.KVUsage = DefaultKVUsageThreshold
	}
	return t
}

// Check reports a threshold that cannot be meant: negative, not finite,
// or a KV share above 1 (which would never trip).
func (t Thresholds) Check() error {
	if !(t.Queue >= 0) || math.IsInf(t.Queue, 1) {
		return fmt.Errorf("enginesignals: queue threshold %v, want a finite count ≥ 0", t.Queue)
	}
	if !(t.KVUsage >= 0 && t.KVUsage <= 1) {
		return fmt.Errorf("enginesignals: KV usage threshold %v, want a share in [0, 1]", t.KVUsage)
	}
	return nil
}

// Saturation says why a rank whose latest signals are s is saturated, or
// "" when it is not. A rank whose signals are stale is saturated whatever
// they said (fail closed: a worker the router cannot see is not a good
// target); a signal the engine does not report never saturates.
func (t Thresholds) Saturation(s Signals, stale bool) string {
	switch {
	case stale:
		return SaturatedStale
	case s.HasLoad && s.Waiting > t.Queue:
		return SaturatedQueue
	case s.HasKV && s.KVUsage > t.KVUsage:
		return SaturatedKV
	}
	return ""
}
