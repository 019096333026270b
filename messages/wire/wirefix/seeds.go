package wirefix

// Seeds returns batches of every shape engines send (map and positional
// events, bin and signed hashes, bigrams, metadata maps, by-type tails, map
// batches, heartbeats): the fuzz targets start from them.
func Seeds() [][]byte {
	var seeds [][]byte
	add := func(b *B) { seeds = append(seeds, b.Bytes()) }
	b := New().Batch(1.5, 3)
	b.Map(8).Str("type").Str("BlockStored").Str("block_hashes").Uints(1<<63+1, 2).Str("parent_block_hash").Uint(9, 64).
		Str("token_ids").Tokens(1, 2, 3, 4).Str("block_size").Uint(2, 0).Str("session_id").Str("s").
		Str("extra_keys").Array(2).Array(2).Str("dynamo-cache-salt:t").Array(2).Str("img").Uint(0, 0).Nil().
		Str("metadata").Map(1).Str("cache_salt").Str("m")
	b.Array(4).Str("BlockRemoved").Array(1).Int(-3, 64).Str("CPU").Uint(0, 0)
	b.Array(1).Str("AllBlocksCleared")
	add(b.Uint(1, 0))
	b = New().Array(2).F32(2).Array(2)
	b.Array(15).Str("BlockStored").Array(1).Bin(make([]byte, 32)).Nil().Array(2).
		Array(2).Uint(1, 0).Uint(2, 0).Array(2).Uint(2, 0).Uint(3, 0).Uint(1, 0).Nil().Str("GPU").
		Map(2).Str("cache_salt").Str("x").Str("session_id").Str("y").Nil().Uint(0, 0).Str("full_attention").
		Nil().Str("LOCAL").Nil().Str("sess")
	b.Array(12).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().Nil().Nil().
		Array(1).Array(1).Array(1).Array(2).Uint(77, 0).Array(0).Uint(3, 0).Str("mla_attention")
	add(b)
	add(New().Map(3).Str("ts").Uint(1, 0).Str("events").Array(1).Map(1).Str("type").Str("LoadStat").
		Str("data_parallel_rank").Nil())
	add(New().Batch(0, 2).Uint(1, 0).Array(0).Nil())
	// TensorRT-LLM's streaming publisher: its eight keys, mm_keys per
	// block, a multimodal token sent as a digest string.
	b = New().Batch(3, 2)
	b.Map(9).Str("type").Str("BlockStored").Str("block_hashes").Array(2).Int(-1<<63+1, 64).Int(2, 64).
		Str("parent_block_hash").Nil().Str("token_ids").Tokens(1, 2, 3, 4).Str("block_size").Uint(2, 0).
		Str("lora_id").Nil().Str("medium").Str("GPU").Str("lora_name").Nil().
		Str("mm_keys").Array(2).Nil().Array(1).Map(4).Str("type").Str("mm_key").Str("hash").Str("ab12").
		Str("start_offset").Uint(1, 0).Str("uuid").Str("u")
	b.Map(4).Str("type").Str("BlockStored").Str("block_hashes").Uints(3).
		Str("token_ids").Array(2).Uint(1, 0).Str("9f86").Str("block_size").Uint(2, 0)
	add(b.Uint(0, 0))
	return seeds
}
