package tracectx

import (
	"context"

	"github.com/kvrouter/kvrouter/messages"
	"go.opentelemetry.io/otel/trace"
)

// FromSpanContext returns sc as a message's trace context; a context that is
// invalid or not sampled becomes the zero value (not traced).
func FromSpanContext(sc trace.SpanContext) messages.TraceContext {
	if !sc.IsValid() || !sc.IsSampled() {
		return messages.TraceContext{}
	}
	return messages.TraceContext{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: byte(sc.TraceFlags())}
}

// SpanContext returns tc as a remote OpenTelemetry span context (invalid for
// the zero value): the span that sent the message runs in another actor,
// possibly on another host.
func SpanContext(tc messages.TraceContext) trace.SpanContext {
	if !tc.Sampled() {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    tc.TraceID,
		SpanID:     tc.SpanID,
		TraceFlags: trace.TraceFlags(tc.Flags),
		Remote:     true,
	})
}

// FromContext returns the trace context of the span in ctx (zero when ctx
// holds no sampled span): what a request handler puts on the message it
// sends.
func FromContext(ctx context.Context) messages.TraceContext {
	return FromSpanContext(trace.SpanContextFromContext(ctx))
}

// ContextWith returns ctx with tc as its remote parent span (ctx itself when
// tc is zero), for code that starts spans from a context.Context.
func ContextWith(ctx context.Context, tc messages.TraceContext) context.Context {
	if !tc.Sampled() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, SpanContext(tc))
}
