package engine

// TensorRT-LLM's ZeroMQ publishers send map events in a positional batch.
// The engine's own (tensorrt_llm/_torch/pyexecutor/kv_cache_events.py, KV
// cache manager V2) and Dynamo's TensorRT-LLM component count their seqs
// from 0 and send no heartbeats; older publishers started at their start
// time in nanoseconds with an empty batch every 5 s (messages/wire/
// README.md). So how seqs start is read from each stream's first seq
// (SeqStartDetected), and a seq counted from 0 does not contradict
// trtllm; a timestamp seq still shows it.
func init() {
	Register(Family{Key: "trtllm", Traits: StreamTraits{SeqStartDetected: true},
		Shows: EvidenceTimestampSeq, Never: EvidencePositional | EvidenceMetadata})
}
