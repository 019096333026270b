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
