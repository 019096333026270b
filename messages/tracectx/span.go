package tracectx

import (
	"context"

	"github.com/kvrouter/kvrouter/messages"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// unconfigured is the global TracerProvider before any was installed (the
// API's delegating no-op). While it is still the global one there is nothing
// to trace, and spans are not started at all: the no-op path allocates a
// context per span.
var unconfigured = otel.GetTracerProvider()

// Enabled reports whether a TracerProvider has been installed: until one
// is, nothing is traced and callers can skip instrumentation altogether.
// The compare cannot panic: unconfigured's dynamic type is a pointer.
func Enabled() bool { return otel.GetTracerProvider() != unconfigured }

// Tracer starts the spans of one instrumentation scope (a package path).
type Tracer struct{ scope string }

// NewTracer returns the Tracer of scope.
func NewTracer(scope string) Tracer { return Tracer{scope: scope} }

// Root starts a span that begins a trace (an engine batch, a replay), or
// returns the zero Span when no provider is installed. Whether it is sampled
// is the provider's sampler's decision; an unsampled root's Context is zero.
func (t Tracer) Root(name string) Span {
	if !Enabled() {
		return Span{}
	}
	_, s := otel.Tracer(t.scope).Start(context.Background(), name)
	return Span{s}
}

// Child starts a span under parent, the trace context of the message being
// handled, or returns the zero Span when parent is not sampled (or no
// provider is installed).
func (t Tracer) Child(parent messages.TraceContext, name string) Span {
	if !parent.Sampled() || !Enabled() {
		return Span{}
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), SpanContext(parent))
	_, s := otel.Tracer(t.scope).Start(ctx, name)
	return Span{s}
}

// StartChild is Child in one call for a stage that needs no attributes: it
// returns the context to put on the stage's output message and the function
// that ends the span.
func (t Tracer) StartChild(parent messages.TraceContext, name string) (messages.TraceContext, func()) {
	s := t.Child(parent, name)
	return s.Context(), s.End
}

// Span is a started span. The zero Span traces nothing; every method is
// then a no-op.
type Span struct{ s trace.Span }

// Recording reports whether the span records attributes and events: build
// them only when it does.
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// Context returns the span's trace context for the messages it sends (zero
// when the span is not sampled).
func (s Span) Context() messages.TraceContext {
	if s.s == nil {
		return messages.TraceContext{}
	}
	return FromSpanContext(s.s.SpanContext())
}

// SetAttributes sets attributes on the span.
func (s Span) SetAttributes(kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(kv...)
	}
}

// AddEvent records a named event (a resync, a clear) on the span.
func (s Span) AddEvent(name string, kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.AddEvent(name, trace.WithAttributes(kv...))
	}
}

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}
