package engine

// SGLang: positional or map events, signed int64 hashes (kept as bit
// patterns), a metadata map at position 7 (cache_salt, session_id), the
// 3-frame replay layout, seq from 0, attn_dp_rank as the batch rank.
func init() {
	Register(Family{Key: "sglang", Traits: StreamTraits{SeqStartsAtZero: true},
		Shows: EvidenceMetadata, Never: EvidenceTimestampSeq})
}
