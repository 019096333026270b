package wire

// Layout is the set of encodings a batch's events used: what the stream
// shows about the engine that wrote it (messages/engine's detection reads
// it; README.md, "Events: positional and map").
type Layout uint8

// The layouts a batch can show.
const (
	// LayoutMap: an event encoded as a map (vLLM ≥ 0.26, TensorRT-LLM,
	// newer SGLang).
	LayoutMap Layout = 1 << iota
	// LayoutPositional: an event encoded as an array (vLLM ≤ 0.25, SGLang).
	LayoutPositional
	// LayoutMetadata: SGLang's metadata map, at position 7, at position 14
	// (its newest positional layout) or under the "metadata" key.
	LayoutMetadata
)

// Has reports whether every layout of o is in l.
func (l Layout) Has(o Layout) bool { return l&o == o }
