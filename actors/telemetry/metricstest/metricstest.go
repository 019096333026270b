// Package metricstest reads what a /metrics handler serves, for tests:
// parse the Prometheus text, find a sample by its labels.
package metricstest

import (
	"io"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse parses Prometheus text into its metric families; a malformed text
// fails the test.
func Parse(tb testing.TB, r io.Reader) map[string]*dto.MetricFamily {
	tb.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		tb.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// Sample returns the value of the first sample of family name whose labels
// include want (a histogram's sample count), and whether there is one.
func Sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
next:
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}
