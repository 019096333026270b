// Package listener holds the engine listener: one actor per engine publisher
// endpoint (worker, dp_rank). Its pure core, Tracker, follows the publisher's
// sequence numbers; the actor owns a ZeroMQ SUB socket (on its own goroutine)
// and, when a replay is needed, a DEALER to the engine's replay endpoint,
// feeds what they receive to the Tracker and forwards batches, in order, to
// the normalizer pool.
//
// Flow control: the actor keeps at most Config.Window batches in flight
// (delivered but not yet acknowledged by the end of the pipeline with
// messages.Applied). When the window is full the socket goroutine stops
// reading; ZeroMQ's own queues then fill and the engine's PUB drops (its
// high-water mark), which the Tracker sees as a gap and repairs by replay —
// so a slow pipeline costs replays, never unbounded memory.
//
// Tracing: each delivered batch opens the root span of its trace and carries
// its context (messages.EngineBatch.Trace); a resync is an event on the batch
// that carries it, and each replay is a span of its own (tracing.go).
package listener
