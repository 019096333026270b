package main

import (
	"encoding/hex"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

var update = flag.Bool("update", false, "rewrite samples/*.hex from the fixtures below")

// sampleFixtures builds each sample payload byte by byte.
var sampleFixtures = map[string]func() []byte{
	"vllm-map": func() []byte {
		b := wirefix.New().Batch(1764400000.25, 3)
		b.Map(9).Str("type").Str("BlockStored").
			Str("block_hashes").Array(2).Uint(0x9e3779b97f4a7c15, 64).Uint(0xc2b2ae3d27d4eb4f, 64).
			Str("parent_block_hash").Nil().
			Str("token_ids").Tokens(101, 102, 103, 104, 105, 106, 107, 108).
			Str("block_size").Uint(4, 0).
			Str("medium").Str("GPU").
			Str("group_idx").Uint(0, 0).
			Str("kv_cache_spec_kind").Str("full_attention").
			Str("session_id").Str("chat-42")
		b.Map(6).Str("type").Str("BlockStored").
			Str("block_hashes").Array(1).Uint(0x165667b19e3779f9, 64).
			Str("parent_block_hash").Uint(0xc2b2ae3d27d4eb4f, 64).
			Str("token_ids").Tokens(109, 110, 111, 112, 113).
			Str("block_size").Uint(4, 0).
			Str("session_id").Str("chat-42")
		b.Map(3).Str("type").Str("BlockRemoved").
			Str("block_hashes").Array(1).Uint(0x165667b19e3779f9, 64).
			Str("medium").Str("GPU")
		return b.Uint(0, 0).Bytes()
	},
	"vllm-removed-copies": func() []byte {
		// As newer vLLM's kv_events.py encodes them (omit_defaults: the
		// stored event leaves its defaulted keys out).
		b := wirefix.New().Batch(1764400006.5, 2)
		b.Map(7).Str("type").Str("BlockStored").
			Str("block_hashes").Array(2).Uint(0xa54ff53a5f1d36f1, 64).Uint(0x510e527fade682d1, 64).
			Str("parent_block_hash").Nil().
			Str("token_ids").Tokens(1, 2, 3, 4, 5, 6, 7, 8).
			Str("block_size").Uint(4, 0).
			Str("lora_id").Nil().
			Str("medium").Str("GPU")
		b.Map(5).Str("type").Str("BlockRemoved").
			Str("block_hashes").Array(2).Uint(0xa54ff53a5f1d36f1, 64).Uint(0x510e527fade682d1, 64).
			Str("medium").Str("GPU").
			Str("locality").Str("LOCAL").
			Str("remaining_copy_counts").Uints(1, 0)
		return b.Uint(0, 0).Bytes()
	},
	"vllm-positional": func() []byte {
		b := wirefix.New().Batch(1764400001.5, 2)
		b.Array(11).Str("BlockStored").Array(1).Uint(1<<63+7, 64).Nil().
			Tokens(1, 2, 3, 4).Uint(4, 0).Nil().Nil().Str("my-lora").Nil().Uint(0, 0).Str("full_attention")
		b.Array(3).Str("BlockRemoved").Array(1).Uint(1<<63+7, 64).Nil()
		return b.Uint(0, 0).Bytes()
	},
	"vllm-bin-hashes": func() []byte {
		digest := make([]byte, 32)
		for i := range digest {
			digest[i] = byte(i * 7)
		}
		b := wirefix.New().Batch(1764400002, 1)
		b.Map(5).Str("type").Str("BlockStored").
			Str("block_hashes").Array(1).Bin(digest).
			Str("parent_block_hash").Nil().
			Str("token_ids").Tokens(5, 6, 7, 8).
			Str("block_size").Uint(4, 0)
		return b.Uint(1, 0).Bytes()
	},
	"sglang-positional": func() []byte {
		b := wirefix.New().Batch(1764400003, 2)
		b.Array(8).Str("BlockStored").Array(2).Int(-4242, 64).Int(77, 64).Nil().
			Tokens(9, 8, 7, 6, 5, 4, 3, 2).Uint(4, 0).Nil().Nil().
			Map(2).Str("cache_salt").Str("tenant-a").Str("session_id").Str("sess-1")
		b.Array(3).Str("BlockRemoved").Array(1).Int(77, 64).Nil()
		return b.Nil().Bytes()
	},
	"trtllm-map": func() []byte {
		b := wirefix.New().Batch(1764400004, 3)
		b.Map(5).Str("type").Str("BlockStored").
			Str("block_hashes").Uints(11, 12).Str("parent_block_hash").Nil().
			Str("token_ids").Tokens(1, 2, 3, 4, 5, 6, 7, 8).Str("block_size").Uint(4, 0)
		b.Map(6).Str("type").Str("BlockStored").
			Str("block_hashes").Uints(11).Str("parent_block_hash").Nil().
			Str("token_ids").Array(0).Str("block_size").Uint(0, 0).Str("medium").Str("CPU")
		b.Map(1).Str("type").Str("AllBlocksCleared")
		return b.Uint(0, 0).Bytes()
	},
	"trtllm-streaming": func() []byte {
		// As tensorrt_llm/_torch/pyexecutor/kv_cache_events.py encodes
		// them: signed int64 hashes (the radix key's first 8 bytes), the
		// eight keys BlockStored always carries, mm_keys one entry per
		// block; a multimodal token sent as its digest string cannot be
		// hashed, so that event is rejected.
		b := wirefix.New().Batch(1764400007.5, 3)
		b.Map(9).Str("type").Str("BlockStored").
			Str("block_hashes").Array(2).Int(-1<<63+1, 64).Int(2, 64).Str("parent_block_hash").Nil().
			Str("token_ids").Tokens(1, 2, 3, 4, 9, 9, 9, 9).Str("block_size").Uint(4, 0).
			Str("lora_id").Nil().Str("medium").Str("GPU").Str("lora_name").Nil().
			Str("mm_keys").Array(2).Array(0).Array(1).
			Map(3).Str("type").Str("mm_key").Str("hash").Str("9f86d081884c7d65").Str("start_offset").Uint(0, 0)
		b.Map(8).Str("type").Str("BlockStored").
			Str("block_hashes").Array(1).Int(3, 64).Str("parent_block_hash").Int(2, 64).
			Str("token_ids").Array(4).Uint(5, 0).Str("a1b2c3d4").Uint(7, 0).Uint(8, 0).Str("block_size").Uint(4, 0).
			Str("lora_id").Nil().Str("medium").Str("GPU").Str("lora_name").Nil()
		b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes").Array(1).Int(2, 64).Str("medium").Str("GPU")
		return b.Uint(0, 0).Bytes()
	},
	"hybrid-groups": func() []byte {
		b := wirefix.New().Batch(1764400005, 3)
		b.Array(11).Str("BlockStored").Uints(21).Nil().Tokens(1, 2, 3, 4).Uint(4, 0).
			Nil().Nil().Nil().Nil().Uint(0, 0).Str("full_attention")
		b.Array(12).Str("BlockStored").Uints(31).Nil().Tokens(1, 2, 3, 4).Uint(4, 0).
			Nil().Nil().Nil().Nil().Uint(1, 0).Str("sliding_window").Uint(128, 0)
		b.Array(4).Str("BlockRemoved").Uints(31).Nil().Uint(1, 0)
		return b.Uint(0, 0).Bytes()
	},
	"eagle-bigram": func() []byte {
		b := wirefix.New().Batch(1764400006, 1)
		b.Array(5).Str("BlockStored").Uints(21, 22).Nil().Array(4).
			Array(2).Uint(10, 0).Uint(11, 0).Array(2).Uint(11, 0).Uint(12, 0).
			Array(2).Uint(12, 0).Uint(13, 0).Array(2).Uint(13, 0).Uint(14, 0).
			Uint(2, 0)
		return b.Uint(0, 0).Bytes()
	},
	"bad-events": func() []byte {
		b := wirefix.New().Batch(1764400007, 5)
		b.Uint(42, 0)                                                                    // not an event
		b.Array(2).Str("BlockInactive").Uints(1)                                         // unknown tag
		b.Array(5).Str("BlockStored").Array(1).Str("oops").Nil().Tokens(1, 2).Uint(2, 0) // str hash
		b.Map(1).Str("block_hashes").Uints(1)                                            // no type
		b.Array(5).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0)             // good
		return b.Uint(0, 0).Bytes()
	},
}

// TestSamples keeps samples/*.hex equal to the fixtures, and checks every
// sample decodes as a batch.
func TestSamples(t *testing.T) {
	for _, s := range sampleAbout {
		build, ok := sampleFixtures[s.name]
		if !ok {
			t.Fatalf("sample %s has no fixture", s.name)
		}
		want := hexLines(build())
		path := "samples/" + s.name + ".hex"
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./cmd/kvrouter -update)", err)
		}
		if string(got) != want {
			t.Errorf("%s is stale: run go test ./cmd/kvrouter -run TestSamples -update", path)
		}
	}
	if len(samples()) != len(sampleFixtures) {
		t.Errorf("%d samples embedded, %d fixtures", len(samples()), len(sampleFixtures))
	}
}

// hexLines formats bytes as hex, 32 bytes a line.
func hexLines(p []byte) string {
	var sb strings.Builder
	for len(p) > 0 {
		n := min(32, len(p))
		sb.WriteString(hex.EncodeToString(p[:n]))
		sb.WriteByte('\n')
		p = p[n:]
	}
	return sb.String()
}
