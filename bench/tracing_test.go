package bench

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkIngestTracing is BenchmarkIngest8Engines with tracing off (no
// provider: the default), and with a provider sampling 1 % and 100 % of
// engine batches (parent-based, as OTEL_TRACES_SAMPLER=
// parentbased_traceidratio sets it). Spans are recorded and batched as in
// production; the exporter drops them, so the figure is kvrouter's own
// cost, not a collector's.
func BenchmarkIngestTracing(b *testing.B) {
	b.Run("off", BenchmarkIngest8Engines)
	for _, c := range []struct {
		name  string
		ratio float64
	}{{"sampled=1%", 0.01}, {"sampled=100%", 1}} {
		b.Run(c.name, func(b *testing.B) {
			spantest.Use(b, sdktrace.NewTracerProvider(
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.ratio))),
				sdktrace.WithBatcher(tracetest.NewNoopExporter())))
			BenchmarkIngest8Engines(b)
		})
	}
}
