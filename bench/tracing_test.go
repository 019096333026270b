package bench

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
)

// BenchmarkIngestTracing is BenchmarkIngest8Engines with tracing off (no
// provider: the default), and with a provider sampling 1 % and 100 % of
// engine batches (parent-based, as OTEL_TRACES_SAMPLER=
// parentbased_traceidratio sets it). Spans are recorded and batched as in
// production; the exporter drops them, so the figure is kvrouter's own
// cost, not a collector's.
func BenchmarkIngestTracing(b *testing.B) { spantest.Sampling(b, BenchmarkIngest8Engines) }
