package bench

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
)

// BenchmarkRouteTracing is BenchmarkRoute with tracing off (no provider:
// the default), and with a provider sampling 1 % and 100 % of route
// requests (parent-based, as OTEL_TRACES_SAMPLER=parentbased_traceidratio
// sets it). The trace's root is the HTTP server span, so the http
// sub-benchmark carries the cost: server span, hashing, one lookup span
// per index shard, the decision; in-process calls start no trace and show
// the cost of looking for one. Spans are recorded and batched as in
// production; the exporter drops them.
func BenchmarkRouteTracing(b *testing.B) { spantest.Sampling(b, BenchmarkRoute) }
