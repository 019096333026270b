package wire

import (
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// trtllmStored writes a BlockStored as TensorRT-LLM's ZeroMQ publisher
// encodes it (kv_cache_events.py's BlockStored, a map in declaration
// order; the C++ sink writes the same eight keys): hashes as signed
// int64 (the first 8 bytes of the radix key), lora_id and lora_name nil,
// medium "GPU", then the extra keys more writes (mm_keys), counted in
// extra.
func trtllmStored(b *wirefix.B, hashes []int64, parent *int64, tokens []uint32, extra int, more func(*wirefix.B)) {
	b.Map(8 + extra).Str("type").Str("BlockStored").Str("block_hashes").Array(len(hashes))
	for _, h := range hashes {
		b.Int(h, 64)
	}
	b.Str("parent_block_hash")
	if parent == nil {
		b.Nil()
	} else {
		b.Int(*parent, 64)
	}
	b.Str("token_ids").Tokens(tokens...).Str("block_size").Uint(4, 0).
		Str("lora_id").Nil().Str("medium").Str("GPU").Str("lora_name").Nil()
	if more != nil {
		more(b)
	}
}

// mmKey writes one MultimodalKey as msgspec encodes it (tag "mm_key" under
// "type"; uuid left out when unset).
func mmKey(b *wirefix.B, hash string, offset uint64, uuid string) {
	if uuid == "" {
		b.Map(3).Str("type").Str("mm_key").Str("hash").Str(hash).Str("start_offset").Uint(offset, 0)
		return
	}
	b.Map(4).Str("type").Str("mm_key").Str("hash").Str(hash).Str("start_offset").Uint(offset, 0).Str("uuid").Str(uuid)
}

// first8 is TensorRT-LLM's wire hash of a radix key starting 0x80 00 … 01.
const first8 = -1<<63 + 1

func mmKeysCases() []conformanceCase {
	mal, lim := messages.ReasonMalformed, messages.ReasonLimitExceeded
	parent := int64(first8)
	return []conformanceCase{
		{
			name: "trtllm/streaming publisher BlockStored, its 8 keys, then a BlockRemoved",
			payload: b3(func(b *wirefix.B) {
				trtllmStored(b, []int64{first8, 2}, nil, []uint32{1, 2, 3, 4, 5, 6, 7, 8}, 0, nil)
			}, func(b *wirefix.B) {
				b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes").Array(2).Int(first8, 64).Int(2, 64).Str("medium").Str("GPU")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1<<63+1, 2), Tokens: tks(1, 2, 3, 4, 5, 6, 7, 8),
				BlockSize: i64(4), Medium: "GPU"},
				Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(1<<63+1, 2), Medium: "GPU"}),
		},
		{
			name: "trtllm/mm_keys: a text block, then one holding two segments (one with a uuid)",
			payload: b3(func(b *wirefix.B) {
				trtllmStored(b, []int64{3, 4}, &parent, []uint32{1, 2, 3, 4, 9, 9, 9, 9}, 1, func(b *wirefix.B) {
					b.Str("mm_keys").Array(2).Array(0).Array(2)
					mmKey(b, "ab12cd", 0, "")
					mmKey(b, "ef34", 2, "img-1")
				})
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(3, 4), Parent: u64(1<<63 + 1),
				Tokens: tks(1, 2, 3, 4, 9, 9, 9, 9), BlockSize: i64(4), Medium: "GPU",
				MM: mm(nil, hs(mmID("ab12cd"), mmID("ef34")))}),
		},
		{
			name: "trtllm/mm_keys nil and text-only entries: no mm hashes",
			payload: b3(func(b *wirefix.B) {
				trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) { b.Str("mm_keys").Nil() })
			}, func(b *wirefix.B) {
				trtllmStored(b, []int64{5}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) { b.Str("mm_keys").Array(1).Nil() })
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(3), Tokens: tks(1, 2, 3, 4), BlockSize: i64(4), Medium: "GPU"},
				Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5), Tokens: tks(1, 2, 3, 4), BlockSize: i64(4), Medium: "GPU"}),
		},
		malformedCase("trtllm/mm_keys with more entries than block hashes", func(b *wirefix.B) {
			trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) {
				b.Str("mm_keys").Array(2).Array(0).Array(1)
				mmKey(b, "ab", 0, "")
			})
		}, "BlockStored", TypeStored, mal),
		malformedCase("trtllm/mm_keys with fewer entries than block hashes", func(b *wirefix.B) {
			trtllmStored(b, []int64{3, 4}, nil, []uint32{1, 2, 3, 4, 5, 6, 7, 8}, 1, func(b *wirefix.B) {
				b.Str("mm_keys").Array(1).Array(1)
				mmKey(b, "ab", 0, "")
			})
		}, "BlockStored", TypeStored, mal),
		malformedCase("trtllm/mm_keys item not a map", func(b *wirefix.B) {
			trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) {
				b.Str("mm_keys").Array(1).Array(1).Str("ab")
			})
		}, "BlockStored", TypeStored, mal),
		malformedCase("trtllm/mm_keys key with an integer hash", func(b *wirefix.B) {
			trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) {
				b.Str("mm_keys").Array(1).Array(1).Map(2).Str("type").Str("mm_key").Str("hash").Uint(7, 0)
			})
		}, "BlockStored", TypeStored, mal),
		malformedCase("trtllm/mm_keys key with a hash of the wrong type before its other keys", func(b *wirefix.B) {
			trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) {
				b.Str("mm_keys").Array(1).Array(1).Map(3).Str("hash").Array(2).Uint(1, 0).Uint(2, 0).
					Str("type").Str("mm_key").Str("start_offset").Uint(0, 0)
			})
		}, "BlockStored", TypeStored, mal),
		malformedCase("trtllm/mm_keys key without a hash", func(b *wirefix.B) {
			trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) {
				b.Str("mm_keys").Array(1).Array(1).Map(2).Str("type").Str("mm_key").Str("start_offset").Uint(0, 0)
			})
		}, "BlockStored", TypeStored, mal),
		malformedCase("trtllm/mm_keys entry not a list", func(b *wirefix.B) {
			trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) {
				b.Str("mm_keys").Array(1).Map(0)
			})
		}, "BlockStored", TypeStored, mal),
		malformedCase("trtllm/mm_keys not a list", func(b *wirefix.B) {
			trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) { b.Str("mm_keys").Str("ab") })
		}, "BlockStored", TypeStored, mal),
		malformedCase("trtllm/token_ids holding a multimodal digest string", func(b *wirefix.B) {
			b.Map(5).Str("type").Str("BlockStored").Str("block_hashes").Uints(3).Str("parent_block_hash").Nil().
				Str("token_ids").Array(4).Uint(1, 0).Uint(2, 0).Str("9f86d081884c7d65").Uint(4, 0).Str("block_size").Uint(4, 0)
		}, "BlockStored", TypeStored, mal),
		malformedCase("stored/map block_mm_infos object with an mm_hash of the wrong type before its other keys", func(b *wirefix.B) {
			b.Map(4).Str("type").Str("BlockStored").
				Str("block_mm_infos").Array(1).Map(1).Str("mm_objects").Array(1).
				Map(2).Str("mm_hash").Str("not-an-int").Str("offsets").Array(1).Array(2).Uint(0, 0).Uint(1, 0).
				Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2)
		}, "BlockStored", TypeStored, mal),
		{
			name: "trtllm/mm_keys past the items cap",
			lim:  Limits{MaxExtraItems: 2},
			payload: sandwich(func(b *wirefix.B) {
				trtllmStored(b, []int64{3}, nil, []uint32{1, 2, 3, 4}, 1, func(b *wirefix.B) {
					b.Str("mm_keys").Array(1).Array(3)
					mmKey(b, "a", 0, "")
					mmKey(b, "b", 1, "")
					mmKey(b, "c", 2, "")
				})
			}),
			want: sandwiched(rejected("BlockStored", TypeStored, lim)),
		},
		{
			name: "trtllm/mm_keys declaring 4 G entries costs nothing",
			payload: b3(func(b *wirefix.B) {
				b.Map(2).Str("type").Str("BlockStored").Str("mm_keys").Raw(0xdd, 0xff, 0xff, 0xff, 0xff)
			}),
			want: Batch{TS: ts0, Events: []Event{{Tag: "BlockStored", Type: TypeStored, Reason: messages.ReasonTruncated}}},
		},
	}
}

func TestConformanceTRTLLMMMKeys(t *testing.T) { runCases(t, mmKeysCases()) }

// A string token id is rejected with a detail that names it, not as any
// wrong type.
func TestStringTokenDetail(t *testing.T) {
	p := b3(func(b *wirefix.B) {
		b.Map(4).Str("type").Str("BlockStored").Str("block_hashes").Uints(3).
			Str("token_ids").Array(1).Str("ab").Str("block_size").Uint(1, 0)
	})
	got, err := NewDecoder(Limits{}, nil).Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	if ev := got.Events[0]; ev.Reason != messages.ReasonMalformed || !strings.Contains(ev.Detail, "multimodal token digest") {
		t.Errorf("got %v %q", ev.Reason, ev.Detail)
	}
}
