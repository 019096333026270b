package wire

// mm_keys is TensorRT-LLM's per-block multimodal identity on its ZeroMQ
// BlockStored (tensorrt_llm/_torch/pyexecutor/kv_cache_events.py,
// MultimodalKey): nil, or one entry per block hash, each nil (a text-only
// block) or a list of keys, one per multimodal segment the block holds:
// {"type": "mm_key", "hash": <hex digest>, "start_offset": n, "uuid": s?}.
// The engine's block hash covers the segments' content, so two images
// behind the same placeholder tokens are different blocks; kvrouter keeps
// them apart the same way, folding each key's hash string into its
// block's mm hashes as XXH3-64(hash), as it folds vLLM's multimodal
// identifiers (extra.go). start_offset and uuid are read past: vLLM's
// offset is not part of the identity either. It is an identity field: a
// key that is not a map, or has no string hash, rejects the event (indexed
// without it, the block would share its hash with a text-only one), and so
// does a list whose length is not the number of block hashes.
func (x *Decoder) mmKeys(st *eventState) error {
	st.entries = -1
	err := x.perBlock(st, "mm_keys", func(block int) error { return x.mmKey(st, block) })
	st.mmKeyEntries = st.entries
	return err
}

// mmKey reads one key of block's mm_keys entry: a map whose "hash" is
// a string of at most MaxStringBytes.
func (x *Decoder) mmKey(st *eventState, block int) error {
	cl, err := x.peek()
	if err != nil {
		return err
	}
	if cl != classMap { // a positional key would put its tag where the hash is
		return firstErr(x.skip(), malformed("mm_keys[%d] holds a msgpack %s, want a map", block, cl))
	}
	var hash string
	if err := x.firstOrKey("hash", func() (err error) { hash, err = x.optString("mm_keys hash"); return err }); err != nil {
		return err
	}
	switch {
	case hash == "":
		return malformed("mm_keys[%d] key without a hash", block)
	case len(hash) > x.lim.MaxStringBytes:
		return overLimit("mm_keys[%d] hash of %d bytes exceeds the cap of %d", block, len(hash), x.lim.MaxStringBytes)
	}
	st.ev.addMM(block, hashIdentifier(hash))
	return nil
}

// checkMMKeys rejects an mm_keys list not aligned with block_hashes.
func (st *eventState) checkMMKeys() {
	if n := st.mmKeyEntries; n >= 0 && st.ev.BlockHashes != nil && n != len(st.ev.BlockHashes) {
		_ = st.fail(malformed("mm_keys has %d entries for %d block hashes", n, len(st.ev.BlockHashes)))
	}
}
