// Package normalizer turns decoded engine events (package wire) into
// messages.PlacementEvent values: it filters KV-cache groups (wire-format §4),
// maps medium and locality to a placement, resolves cache namespaces, and
// recomputes each block's local hash (package blockhash).
//
// The core, Normalizer, is a plain deterministic value with no goroutines or
// I/O: one per engine worker, fed batches in stream order. The actor that
// owns it (added with the pipeline) is a thin shell around it; it traces
// each batch as a child span of the listener's (tracing.go).
package normalizer
