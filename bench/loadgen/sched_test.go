package loadgen

import (
	"math"
	"testing"
)

// schedQuantile ranks only what was recorded between the two readings and
// answers with the bucket's upper bound in µs.
func TestSchedQuantile(t *testing.T) {
	// bucket i holds [buckets[i], buckets[i+1]) seconds
	buckets := []float64{0, 1e-6, 1e-5, 1e-4, 1e-3, math.Inf(1)}
	before := schedSample{counts: []uint64{5, 0, 0, 0, 7}, buckets: buckets}
	after := schedSample{counts: []uint64{5, 90, 9, 1, 7}, buckets: buckets} // 100 new: 90 < 10 µs, 9 < 100 µs, 1 < 1 ms
	for _, c := range []struct{ q, want float64 }{{0.5, 10}, {0.9, 10}, {0.95, 100}, {0.99, 100}, {1, 1000}} {
		if got := schedQuantile(before, after, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q %v: %v µs, want %v", c.q, got, c.want)
		}
	}
	tail := schedSample{counts: []uint64{5, 90, 9, 0, 8}, buckets: buckets} // the slowest one in the open last bucket
	if got := schedQuantile(before, tail, 1); got != 1000 {
		t.Errorf("open last bucket: %v µs, want its lower bound 1000", got)
	}
	if got := schedQuantile(after, after, 0.99); got != 0 {
		t.Errorf("nothing recorded: %v", got)
	}
	if got := schedQuantile(schedSample{}, after, 0.99); got != 0 {
		t.Errorf("mismatched readings: %v", got)
	}
	if live := readSched(); len(live.counts) == 0 || len(live.buckets) != len(live.counts)+1 {
		t.Errorf("runtime histogram %s: %d counts, %d buckets", schedMetric, len(live.counts), len(live.buckets))
	}
}
