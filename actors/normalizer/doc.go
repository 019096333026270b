// Package normalizer turns decoded engine events (package wire) into
// messages.PlacementEvent values: it filters KV-cache groups, maps medium and
// locality to a placement, resolves cache namespaces, and recomputes each
// block's local hash (package blockhash). README.md beside this file gives
// the rules and their order.
//
// The core, Normalizer, is a plain deterministic value with no goroutines or
// I/O: one per engine worker, fed batches in stream order. The pool actor
// around it is a thin shell; it traces each batch as a child span of the
// listener's (tracing.go).
package normalizer
