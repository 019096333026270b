// Package tracectx carries OpenTelemetry spans across actors and hosts
// through messages.TraceContext, the plain-data trace context of a
// message: it converts between that value and OpenTelemetry's SpanContext
// and context.Context, and starts a stage's span as the child of the span
// that sent the message.
//
// A stage that handles one message does:
//
//	var tracer = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/mystage")
//
//	sp := tracer.Child(m.Trace, "kvrouter.mystage")
//	defer sp.End()
//	if sp.Recording() {
//		sp.SetAttributes(tracectx.Worker.Int64(int64(w)))
//	}
//	out.Trace = sp.Context() // the next stage's parent
//
// Spans go to the global TracerProvider (otel.SetTracerProvider), looked up
// at each span start so tests can install an in-memory exporter. Until a
// provider is installed, and for any message whose context is not sampled,
// nothing is allocated: the zero Span does nothing and its Context is zero.
// Attribute values should be built only under Recording, since building
// them costs even when the span drops them.
//
// The sampling decision is made once, at the root (the listener's batch
// span, the HTTP request): a child is started only under a sampled parent,
// so a trace is either whole or absent. README.md beside this file lists
// the spans of a batch's and a route's trace and how tracing is configured.
package tracectx
