package telemetry

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// textGatherer is a prometheus.Gatherer over a writer of the Prometheus
// text format: its output is parsed at each Gather.
type textGatherer func(io.Writer) error

// Gather implements prometheus.Gatherer.
func (t textGatherer) Gather() ([]*dto.MetricFamily, error) {
	var buf bytes.Buffer
	if err := t(&buf); err != nil {
		return nil, fmt.Errorf("metrics text: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		return nil, fmt.Errorf("metrics text: %w", err)
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		out = append(out, fams[name])
	}
	return out, nil
}
