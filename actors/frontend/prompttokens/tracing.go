package prompttokens

import (
	"context"
	"net/http"

	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Span names: one span per resolution, under the request's span; the
// engine round trips are otelhttp client spans under it (and carry the
// traceparent to the engine).
const (
	SpanCompletion = "prompttokens.completion"
	SpanChat       = "prompttokens.chat"
)

var tracer = otel.Tracer("github.com/kvrouter/kvrouter/actors/frontend/prompttokens")

// traced starts the resolution's span when a TracerProvider is installed;
// end records the result on it. Without one both cost nothing.
func traced(ctx context.Context, name, model string) (context.Context, func(Result)) {
	if !tracectx.Enabled() {
		return ctx, func(Result) {}
	}
	ctx, span := tracer.Start(ctx, name, trace.WithAttributes(attribute.String("model", model)))
	return ctx, func(res Result) {
		span.SetAttributes(attribute.String("source", string(res.Source)), attribute.Bool("cached", res.Cached),
			attribute.Int("tokens", len(res.IDs)))
		if res.Reason != "" {
			span.SetAttributes(attribute.String("reason", res.Reason))
		}
		span.End()
	}
}

// engineClient is the HTTP client for engines: otelhttp's transport when
// tracing is on (client spans, traceparent sent), else the default.
func engineClient() *http.Client {
	if !tracectx.Enabled() {
		return http.DefaultClient
	}
	return &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport, otelhttp.WithMeterProvider(noop.NewMeterProvider()))}
}
