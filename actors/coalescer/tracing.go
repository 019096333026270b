package coalescer

import (
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
)

var tracer = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/coalescer")

// Span names and events of the stream actors.
const (
	// SpanCoalesce is a stream actor's span of one batch, a child of the
	// normalizer's; the RouterEventBatch it sends carries it as parent of the
	// index's apply span.
	SpanCoalesce = "kvrouter.coalesce"
	// EventResync: the batch carried a resync; the stream's ranks were
	// cleared in the index (reason, exact, ranks).
	EventResync = "resync"
	// EventEngineCleared: the engine reported its cache emptied
	// (AllBlocksCleared).
	EventEngineCleared = "engine_cleared"
	// EventUnknownParent: an exact stream stored a block under a parent it
	// never stored; the stream is degraded.
	EventUnknownParent = "unknown_parent"
	// SpanRestartClear is a trace of its own: a restarted stream actor
	// clearing its stream in the index (its coalescing state was lost).
	SpanRestartClear = "kvrouter.coalescer.restart_clear"
)

// Attributes of the coalesce span (besides tracectx's).
const (
	emittedKey = attribute.Key("kvrouter.events.emitted")
	stateKey   = attribute.Key("kvrouter.stream.state")
	ranksKey   = attribute.Key("kvrouter.ranks")
)

// restartSpan starts the span of a restarted stream actor's clear.
func restartSpan(id messages.StreamID) tracectx.Span {
	sp := tracer.Root(SpanRestartClear)
	if sp.Recording() {
		sp.SetAttributes(tracectx.Worker.Int64(int64(id.Worker)), tracectx.DpRank.Int64(int64(id.DpRank)),
			tracectx.Reason.String("actor_restart"), stateKey.String(string(StateDegraded)))
	}
	return sp
}
