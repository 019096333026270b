package loadgen

import (
	"math"
	"slices"
	"time"
)

// Latency summarises a latency sample, in microseconds.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	Max  float64 `json:"max_us"`
	Mean float64 `json:"mean_us"`
}

// Summarize sorts d in place and returns its nearest-rank percentiles (the
// smallest sample with at least p of the samples at or below it). An empty
// sample gives the zero Latency.
func Summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	us := func(x time.Duration) float64 { return float64(x) / float64(time.Microsecond) }
	return Latency{
		N:    len(d),
		P50:  us(Percentile(d, 0.50)),
		P99:  us(Percentile(d, 0.99)),
		P999: us(Percentile(d, 0.999)),
		Max:  us(d[len(d)-1]),
		Mean: us(sum) / float64(len(d)),
	}
}

// Percentile returns the nearest-rank p-quantile (0 < p ≤ 1) of a sorted,
// non-empty sample.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// CoV is the coefficient of variation (population standard deviation over
// the mean) of xs; 0 for an empty sample or a zero mean.
func CoV(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	if mean == 0 {
		return 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss/float64(len(xs))) / mean
}

// LagGrowing reports whether a lag series (in measurement order) grew
// while it was taken — the sign of a pipeline falling behind: the median of
// its last quarter exceeds both four times the median of its first quarter
// and floor. Fewer than 8 samples never count as growing.
func LagGrowing(lags []time.Duration, floor time.Duration) bool {
	q := len(lags) / 4
	if q < 2 {
		return false
	}
	median := func(xs []time.Duration) time.Duration {
		s := slices.Clone(xs)
		slices.Sort(s)
		return Percentile(s, 0.5)
	}
	first, last := median(lags[:q]), median(lags[len(lags)-q:])
	return last > floor && last > 4*first
}

// ttftMs is the mean and nearest-rank p99 of TTFT estimates given in
// seconds, in milliseconds (0, 0 for none).
func ttftMs(s []float64) (mean, p99 float64) {
	if len(s) == 0 {
		return 0, 0
	}
	d := make([]time.Duration, len(s))
	for i, x := range s {
		d[i] = time.Duration(x * float64(time.Second))
	}
	l := Summarize(d)
	return l.Mean / 1000, l.P99 / 1000
}
