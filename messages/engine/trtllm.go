package engine

// TensorRT-LLM has two ZeroMQ publishers, both of map events in a
// positional batch. The engine's own (tensorrt_llm/_torch/pyexecutor/
// kv_cache_events.py, KV cache manager V2) counts its seqs from 0, sends
// no heartbeats and answers replays in vLLM ≥ 0.26's 4-frame layout;
// Dynamo's TensorRT-LLM component starts its seqs at its start time in
// nanoseconds, sends an empty batch every 5 s and an AllBlocksCleared
// after internal drops. So how seqs start is read from each stream's
// first seq (SeqStartDetected), and a seq counted from 0 does not
// contradict trtllm; a timestamp seq still shows it.
func init() {
	Register(Family{Key: "trtllm", Traits: StreamTraits{SeqStartDetected: true},
		Shows: EvidenceTimestampSeq, Never: EvidencePositional | EvidenceMetadata})
}
