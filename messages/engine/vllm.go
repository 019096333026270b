package engine

// vLLM: map events since 0.26 (positional before), unsigned 64-bit hashes or,
// with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0, the raw 32-byte digest as bin
// (folded to its last 8 bytes), seq from 0, the 4-frame replay layout since
// 0.26 and the 3-frame one before.
func init() {
	Register(Family{Key: "vllm", Traits: StreamTraits{SeqStartsAtZero: true},
		Shows: EvidenceMapEvents, Never: EvidenceTimestampSeq | EvidenceMetadata})
}
