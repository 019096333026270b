package engine

// TensorRT-LLM's native publisher: map events, seq starting at the
// publisher's start time in nanoseconds, empty batches every 5 s as
// heartbeats, and an AllBlocksCleared after internal drops.
func init() {
	Register(Family{Key: "trtllm", Traits: StreamTraits{Heartbeats: true, HeartbeatEverySeconds: 5},
		Shows: EvidenceTimestampSeq, Never: EvidenceCountSeq | EvidencePositional | EvidenceMetadata})
}
