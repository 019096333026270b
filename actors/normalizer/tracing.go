package normalizer

import (
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
)

var tracer = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/normalizer")

// SpanNormalize is the normalizer's span of one engine batch, a child of the
// listener's; a payload that could not be read is its event EventDropped.
const (
	SpanNormalize = "kvrouter.normalize"
	EventDropped  = "dropped"
)

// Attributes of the normalize span (besides tracectx's).
const (
	acceptedKey = attribute.Key("kvrouter.events.accepted")
	lostKey     = attribute.Key("kvrouter.events.lost") // unreachable after a truncated event
	errorKey    = attribute.Key("error.message")
)
