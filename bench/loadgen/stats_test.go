package loadgen

import (
	"math"
	"testing"
	"time"
)

func TestSummarizeNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1000; i >= 1; i-- { // 1..1000 µs, reversed: Summarize sorts
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	l := Summarize(d)
	want := Latency{N: 1000, P50: 500, P99: 990, P999: 999, Max: 1000, Mean: 500.5}
	if l != want {
		t.Errorf("Summarize = %+v, want %+v", l, want)
	}
	if got := Summarize(nil); got != (Latency{}) {
		t.Errorf("empty sample: %+v", got)
	}
	one := Summarize([]time.Duration{7 * time.Microsecond})
	if one.P50 != 7 || one.P999 != 7 || one.N != 1 {
		t.Errorf("one sample: %+v", one)
	}
}

func TestPercentileSmallSamples(t *testing.T) {
	s := []time.Duration{1, 2, 3, 4}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.25, 1}, {0.26, 2}, {0.5, 2}, {0.75, 3}, {0.99, 4}, {1, 4}, {0.001, 1}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestCoV(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{0, 0}, 0},
		{[]float64{5, 5, 5}, 0},
		{[]float64{1, 3}, 0.5},                // mean 2, σ 1
		{[]float64{4, 0, 0, 0}, math.Sqrt(3)}, // everything on one of four
	} {
		if got := CoV(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("CoV(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

func TestLagGrowing(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	floor := 50 * time.Millisecond
	for _, c := range []struct {
		name string
		lags []time.Duration
		want bool
	}{
		{"steady", ms(1, 2, 1, 2, 1, 2, 1, 2), false},
		{"growing past the floor", ms(10, 10, 20, 40, 80, 160, 300, 400), true},
		{"growing under the floor", ms(1, 1, 2, 4, 8, 16, 30, 40), false},
		{"high but flat", ms(200, 210, 190, 200, 205, 195, 200, 210), false},
		{"too few samples", ms(1, 1, 900, 900), false},
	} {
		if got := LagGrowing(c.lags, floor); got != c.want {
			t.Errorf("%s: LagGrowing = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSaturated(t *testing.T) {
	base := SweepPoint{Offered: 1000, Achieved: 1000, Requests: 1000, Latency: Latency{P99: 500}}
	if Saturated(base) {
		t.Error("a point that kept up is saturated")
	}
	slow, errs, late := base, base, base
	slow.Achieved = 900
	errs.Errors = 11
	late.Latency.P99 = 2e6
	for name, p := range map[string]SweepPoint{"slow": slow, "errors": errs, "late": late} {
		if !Saturated(p) {
			t.Errorf("%s point not saturated", name)
		}
	}
}

func TestPerEntry(t *testing.T) {
	if got := PerEntry(1100, 100, 10); got != 100 {
		t.Errorf("PerEntry = %v, want 100", got)
	}
	if got := PerEntry(1100, 100, 0); got != 0 {
		t.Errorf("PerEntry without entries = %v", got)
	}
}
