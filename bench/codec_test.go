package bench

import (
	"testing"

	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// vllmBatch builds a batch as vLLM ≥ 0.26 publishes it: map events with
// default-valued fields omitted, u64 hashes, token ids of a 150k vocabulary.
func vllmBatch(events, blocksPerEvent, blockSize int) []byte {
	b := wirefix.New().Batch(1764400000.5, events)
	hash := uint64(0x9e3779b97f4a7c15)
	tok := uint32(1)
	for e := 0; e < events; e++ {
		b.Map(8).Str("type").Str("BlockStored")
		b.Str("block_hashes").Array(blocksPerEvent)
		first := hash
		for i := 0; i < blocksPerEvent; i++ {
			hash = hash*6364136223846793005 + 1442695040888963407
			b.Uint(hash, 64)
		}
		b.Str("parent_block_hash").Uint(first, 64)
		b.Str("token_ids").Array(blocksPerEvent * blockSize)
		for i := 0; i < blocksPerEvent*blockSize; i++ {
			tok = (tok*48271 + 11) % 151936
			b.Uint(uint64(tok), 0)
		}
		b.Str("block_size").Uint(uint64(blockSize), 0)
		b.Str("medium").Str("GPU")
		b.Str("group_idx").Uint(0, 0)
		b.Str("kv_cache_spec_kind").Str("full_attention")
	}
	return b.Uint(0, 0).Bytes()
}

// BenchmarkDecodeNormalize measures the codec hot path on one core: decode
// a vLLM 0.26 batch, filter, hash 16-token blocks and build PlacementEvents.
func BenchmarkDecodeNormalize(b *testing.B) {
	const events, blocks, blockSize = 8, 32, 16
	payload := vllmBatch(events, blocks, blockSize)
	dec := wire.NewDecoder(wire.DefaultLimits(), nil)
	norm := normalizer.New(normalizer.Config{Worker: 1, BlockSize: blockSize})
	out := make([]normalizer.Outcome, 0, events)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		batch, err := dec.Decode(payload)
		if err != nil {
			b.Fatal(err)
		}
		out = norm.Batch(batch, out[:0])
		if !out[0].Accepted() {
			b.Fatalf("rejected: %v", out[0].Detail)
		}
	}
	b.ReportMetric(float64(b.N*events*blocks)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(testing.AllocsPerRun(10, func() {
		batch, _ := dec.Decode(payload)
		out = norm.Batch(batch, out[:0])
	}))/float64(events*blocks), "allocs/block")
}

// BenchmarkDecode isolates msgpack decoding.
func BenchmarkDecode(b *testing.B) {
	const events, blocks = 8, 32
	payload := vllmBatch(events, blocks, 16)
	dec := wire.NewDecoder(wire.DefaultLimits(), nil)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Decode(payload); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*events*blocks)/b.Elapsed().Seconds(), "blocks/s")
}

// BenchmarkDecodeRemoved measures the decoder's cost per event on what an
// evicting cache publishes: one BlockRemoved per evicted block, in vLLM
// 0.26's map form (type, one u64 hash, medium, group_idx), 32 to a batch.
// On the pinned ingest load about two in three stored blocks are evicted
// again, so these events are as many as the stored blocks' events and
// their cost is almost all per-event work (keys, tag, strings, headers).
func BenchmarkDecodeRemoved(b *testing.B) {
	const events = 32
	w := wirefix.New().Batch(1764400000.5, events)
	hash := uint64(0x9e3779b97f4a7c15)
	for e := 0; e < events; e++ {
		hash = hash*6364136223846793005 + 1442695040888963407
		w.Map(4).Str("type").Str("BlockRemoved").Str("block_hashes").Array(1).Uint(hash, 64).
			Str("medium").Str("GPU").Str("group_idx").Uint(0, 0)
	}
	payload := w.Uint(0, 0).Bytes()
	dec := wire.NewDecoder(wire.DefaultLimits(), nil)
	b.ReportAllocs()
	for b.Loop() {
		batch, err := dec.Decode(payload)
		if err != nil || len(batch.Events) != events || batch.Events[events-1].Type != wire.TypeRemoved {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}
