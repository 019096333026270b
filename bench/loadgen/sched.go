package loadgen

import (
	"math"
	"runtime/metrics"
)

// schedMetric is the Go runtime's histogram of the time goroutines spent
// runnable before they ran: how long a woken goroutine (a route request's
// waiter, an actor's mailbox) waited for a CPU.
const schedMetric = "/sched/latencies:seconds"

// schedSample is a reading of schedMetric.
type schedSample struct {
	counts  []uint64
	buckets []float64
}

func readSched() schedSample {
	s := []metrics.Sample{{Name: schedMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return schedSample{}
	}
	h := s[0].Value.Float64Histogram()
	return schedSample{counts: append([]uint64(nil), h.Counts...), buckets: h.Buckets}
}

// schedQuantile returns the q-quantile (0..1) in µs of the scheduling
// latencies recorded between two readings, from the histogram's bucket
// upper bounds (0 when nothing was recorded).
func schedQuantile(before, after schedSample, q float64) float64 {
	if len(after.counts) == 0 || len(before.counts) != len(after.counts) {
		return 0
	}
	var total uint64
	diff := make([]uint64, len(after.counts))
	for i := range diff {
		diff[i] = after.counts[i] - before.counts[i]
		total += diff[i]
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, n := range diff {
		if seen += n; seen >= rank {
			upper := after.buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = after.buckets[i]
			}
			return upper * 1e6
		}
	}
	return 0
}
