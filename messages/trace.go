package messages

// TraceContext is a W3C trace context (traceparent) carried as plain data in
// the messages of one engine batch or route request, so the spans of the
// actors that handle it join one trace, in process or across hosts. The
// zero value means "not traced": only sampled contexts are carried, so a
// stage seeing a zero Trace starts no span. Package messages/tracectx
// converts it to and from OpenTelemetry's types. The W3C tracestate is not
// carried.
type TraceContext struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte // W3C trace flags; bit 0 = sampled
}

// Sampled reports whether the context names a sampled span: a stage then
// starts its span as that span's child.
func (t TraceContext) Sampled() bool {
	return t.Flags&1 != 0 && t.TraceID != [16]byte{} && t.SpanID != [8]byte{}
}
