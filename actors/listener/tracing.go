package listener

import (
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
)

var tracer = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/listener")

// Span names and events of the listener.
const (
	// SpanBatch is the root span of an engine batch's trace: the listener
	// delivering it. A resync carried by the batch is its event EventResync.
	SpanBatch = "kvrouter.listener.batch"
	// SpanReplay is one replay request, a trace of its own, ended with its
	// result (ok, timeout, error, abandoned).
	SpanReplay  = "kvrouter.listener.replay"
	EventResync = "resync"
)

// batchSpan starts the root span of a batch about to be delivered.
func batchSpan(st *stream, seq uint64, payload []byte) tracectx.Span {
	sp := tracer.Root(SpanBatch)
	if sp.Recording() {
		sp.SetAttributes(
			tracectx.Worker.Int64(int64(st.id.Worker)),
			tracectx.DpRank.Int64(int64(st.id.DpRank)),
			tracectx.Seq.Int64(int64(seq)),
			tracectx.Topic.String(string(st.topic)),
			tracectx.Bytes.Int(len(payload)),
		)
		if st.resync.Reason != "" {
			sp.AddEvent(EventResync, tracectx.Reason.String(st.resync.Reason), tracectx.Exact.Bool(st.resync.Exact))
		}
	}
	return sp
}

// replaySpan is the span of the running replay (zero when none is traced).
type replaySpan struct{ sp tracectx.Span }

func startReplaySpan(id messages.StreamID, from uint64) replaySpan {
	sp := tracer.Root(SpanReplay)
	if sp.Recording() {
		sp.SetAttributes(tracectx.Worker.Int64(int64(id.Worker)), tracectx.DpRank.Int64(int64(id.DpRank)),
			tracectx.Seq.Int64(int64(from)))
	}
	return replaySpan{sp}
}

// end ends the replay's span with its result; a second end does nothing.
func (r *replaySpan) end(result, err string) {
	if r.sp.Recording() {
		r.sp.SetAttributes(resultKey.String(result))
		if err != "" {
			r.sp.SetAttributes(errorKey.String(err))
		}
	}
	r.sp.End()
	*r = replaySpan{}
}

// Attributes of the replay span.
const (
	resultKey = attribute.Key("kvrouter.replay.result")
	errorKey  = attribute.Key("error.message")
)

// replayResult names a replay's outcome (the Stats.Replays key).
func replayResult(m replayDone) string {
	switch {
	case m.err != "":
		return "error"
	case m.timeout:
		return "timeout"
	}
	return "ok"
}
