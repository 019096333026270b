// Package spantest installs an in-memory span exporter as the global
// TracerProvider for a test, and reads what it recorded.
package spantest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Install makes a TracerProvider with sampler (nil: always sample) and a
// synchronous in-memory exporter the global one until the test ends; ended
// spans are in the returned exporter at once. Tests using it must not run
// in parallel: the provider is global.
func Install(tb testing.TB, sampler sdktrace.Sampler) *tracetest.InMemoryExporter {
	tb.Helper()
	if sampler == nil {
		sampler = sdktrace.AlwaysSample()
	}
	exp := tracetest.NewInMemoryExporter()
	Use(tb, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler)))
	return exp
}

// Use makes tp the global TracerProvider until the test ends, then restores
// the previous one and shuts tp down.
func Use(tb testing.TB, tp *sdktrace.TracerProvider) {
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	tb.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
}

// ByName returns the recorded spans named name.
func ByName(exp *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Sampling runs bench three times: with tracing off (no provider: the
// default), and with a provider sampling 1 % and 100 % of traces
// (parent-based, as OTEL_TRACES_SAMPLER=parentbased_traceidratio sets it),
// spans recorded and batched as in production and dropped by the exporter:
// the cost of tracing, not of a collector.
func Sampling(b *testing.B, bench func(*testing.B)) {
	b.Run("off", bench)
	for _, c := range []struct {
		name  string
		ratio float64
	}{{"sampled=1%", 0.01}, {"sampled=100%", 1}} {
		b.Run(c.name, func(b *testing.B) {
			Use(b, sdktrace.NewTracerProvider(
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.ratio))),
				sdktrace.WithBatcher(tracetest.NewNoopExporter())))
			bench(b)
		})
	}
}
