package bench

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkRouteTracing is BenchmarkRoute with tracing off (no provider:
// the default), and with a provider sampling 1 % and 100 % of route
// requests (parent-based, as OTEL_TRACES_SAMPLER=parentbased_traceidratio
// sets it). The trace's root is the HTTP server span, so the http
// sub-benchmark carries the cost: server span, hashing, one lookup span
// per index shard, the decision; in-process calls start no trace and show
// the cost of looking for one. Spans are recorded and batched as in
// production; the exporter drops them.
func BenchmarkRouteTracing(b *testing.B) {
	b.Run("off", BenchmarkRoute)
	for _, c := range []struct {
		name  string
		ratio float64
	}{{"sampled=1%", 0.01}, {"sampled=100%", 1}} {
		b.Run(c.name, func(b *testing.B) {
			spantest.Use(b, sdktrace.NewTracerProvider(
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.ratio))),
				sdktrace.WithBatcher(tracetest.NewNoopExporter())))
			BenchmarkRoute(b)
		})
	}
}
