package messages

import (
	"github.com/asynkron/protoactor-go/actor"
)

// StreamID names one engine publisher endpoint as registered: a worker and
// the dp rank its endpoint serves. (A batch may carry its own rank; events
// are keyed by that.)
type StreamID struct {
	Worker WorkerID
	DpRank DpRank
}

// Resync tells the stages after the listener that a stream's index state must
// be dropped before the batch that carries it. Reason is "" when there is
// nothing to do; Exact says whether the stream is complete from this batch
// on (a fresh publisher) or degraded (earlier history unknown).
//
// Keep marks the opposite case, a stream resumed from a position loaded
// from a peer's dump (kvrouter serve --bootstrap-from) whose history lines
// up: the index already holds its state, so nothing is dropped; Exact is
// then the state the peer had.
type Resync struct {
	Reason string
	Exact  bool
	Keep   bool
}

// Position is how far the index's state of one stream goes: the publisher
// seq of the last engine batch applied, and whether that state is exact
// (complete history from an empty cache). A dump carries each stream's
// Position so a router loading it can resume the stream there.
type Position struct {
	Stream StreamID
	Seq    uint64
	Exact  bool
	// Known is false when the position is lost (the stream's state was
	// dropped without a batch to resume from).
	Known bool
}

// EngineBatch is one engine batch, delivered by its stream's listener in
// publisher order (gaps already filled or declared with a Resync). It is the
// unit of work between actors: one message per batch, never per block.
type EngineBatch struct {
	Stream StreamID
	// Engine is the adapter name (engine.Lookup).
	Engine string
	// BlockSize is the stream's configured block size (0: trust the engine).
	BlockSize int
	Seq       uint64
	// Payload is the engine's msgpack batch; nil makes the message a marker
	// that carries only its Resync (the listener dropped the stream's state
	// without a batch, e.g. when the connection broke), at Seq, the last
	// delivered seq.
	Payload    []byte
	Resync     Resync
	ReceivedAt int64 // unix nanoseconds, for lag figures
	// Listener is acknowledged once the batch has been applied (flow
	// control: a listener keeps a bounded window of unacknowledged batches).
	Listener *actor.PID
	// Trace is the listener's span for this batch (zero: not traced).
	Trace TraceContext
}

// NormalizedBatch is what the normalizer made of one EngineBatch: the
// accepted events in order (rejections are counted, not forwarded).
type NormalizedBatch struct {
	Stream StreamID
	Seq    uint64
	Resync Resync
	// Lost says the batch could not be applied whole (its Resync then drops
	// the stream's state); the listener may rebuild the stream by replay.
	Lost       bool
	Events     []PlacementEvent
	ReceivedAt int64
	Listener   *actor.PID
	// Trace is the normalizer's span for this batch (zero: not traced).
	Trace TraceContext
}

// Applied acknowledges batches to their listener: every batch up to and
// including Seq has left the pipeline (RouterEventBatch.Ack says who sends
// it).
type Applied struct {
	Stream StreamID
	Seq    uint64
	Count  int
	// Lost says the batch at Seq could not be applied whole
	// (NormalizedBatch.Lost).
	Lost bool
}

// GetPriority ranks batches below requests in the priority mailboxes of
// the actors that also answer route-path reads (the index shards; see
// actors/mailbox): a query may pass batches still queued — it sees the
// index a little earlier — while batches keep their order among themselves
// and with everything else sent at this priority.
func (*RouterEventBatch) GetPriority() int8 { return BackgroundPriority }

// BackgroundPriority is protoactor's default priority minus one.
const BackgroundPriority = 3

// RouterEventBatch carries one stream's emitted events to the index, in
// order. Clear asks the index to drop every listed (worker, dp_rank) first.
type RouterEventBatch struct {
	Clear  []WorkerKey
	Events []RouterEvent
	// Position is where the stream stands once the batch is applied (not
	// Known after a clear that no batch follows: a crashed stream actor).
	Position Position
	// Trace is the coalescer's span that produced the batch (zero: not
	// traced); the index's apply span is its child.
	Trace TraceContext
	// Ack, when set, is the acknowledgement of the engine batch this batch
	// was made from, sent once the batch has been applied: by the index
	// shard after applying it (in a cluster, by the index front once the
	// batch is handed to its shard's grain). The listener's credit window
	// then bounds the batches queued at the index, not only those before
	// it. The coalescer sets it; followers ignore it.
	Ack *Ack
}

// Ack is an acknowledgement that travels with a batch until the batch is
// applied (RouterEventBatch.Ack): Applied, for the listener at To.
type Ack struct {
	To      *actor.PID
	Applied Applied
}
