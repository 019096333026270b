package normalizer

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// firstLocal decodes and normalizes one BlockStored of a 4-token block
// (hash 9, tokens 0 0 0 0) whose fifth map entry extra writes, and
// returns the block's local hash.
func firstLocal(t *testing.T, extra func(*wirefix.B)) messages.LocalHash {
	t.Helper()
	b := wirefix.New().Batch(1, 1).Map(5).Str("type").Str("BlockStored").Str("block_hashes").Array(1).Uint(9, 0).
		Str("token_ids").Tokens(0, 0, 0, 0).Str("block_size").Uint(4, 0)
	extra(b)
	wb, err := wire.NewDecoder(wire.Limits{}, nil).Decode(b.Nil().Bytes())
	if err != nil {
		t.Fatal(err)
	}
	out := New(Config{Worker: 1}).Batch(wb, nil)
	if len(out) != 1 || !out[0].Accepted() {
		t.Fatalf("outcome %+v, want one accepted event", out)
	}
	return out[0].Event.Event.Blocks[0].TokensHash
}

// TensorRT-LLM's mm_keys are block identity: the same placeholder tokens
// behind another image are another block, never the text-only one; a
// segment's hash string folds as vLLM's multimodal identifier of the same
// string does, so both engines' events of one image meet in one
// namespace.
func TestTRTLLMMMKeysAreBlockIdentity(t *testing.T) {
	trt := func(hash string) func(*wirefix.B) {
		return func(b *wirefix.B) {
			b.Str("mm_keys").Array(1).Array(1).Map(3).Str("type").Str("mm_key").Str("hash").Str(hash).Str("start_offset").Uint(0, 0)
		}
	}
	vllm := func(id string) func(*wirefix.B) {
		return func(b *wirefix.B) { b.Str("extra_keys").Array(1).Array(1).Array(2).Str(id).Uint(0, 0) }
	}
	textOnly := func(b *wirefix.B) { b.Str("mm_keys").Array(1).Array(0) }
	plain, a, b := firstLocal(t, textOnly), firstLocal(t, trt("aa11")), firstLocal(t, trt("bb22"))
	if plain == a || a == b || plain == b {
		t.Errorf("local hashes text-only %x, image A %x, image B %x: want all different", plain, a, b)
	}
	if v := firstLocal(t, vllm("aa11")); v != a {
		t.Errorf("vLLM's identifier aa11 hashes %x, TensorRT-LLM's mm_key aa11 %x: want equal", v, a)
	}
}

// No publisher sends tokens_hashes in place of token_ids
// (messages/wire/README.md): such a BlockStored is skipped like any
// unknown key, so the event has no tokens and is rejected no_tokens,
// never indexed under hashes kvrouter did not compute.
func TestTokensHashesAreNotTrusted(t *testing.T) {
	b := wirefix.New().Batch(1, 1).Map(5).Str("type").Str("BlockStored").Str("block_hashes").Array(1).Uint(9, 0).
		Str("parent_block_hash").Nil().Str("tokens_hashes").Uints(12345).Str("block_size").Uint(4, 0)
	wb, err := wire.NewDecoder(wire.Limits{}, nil).Decode(b.Nil().Bytes())
	if err != nil {
		t.Fatal(err)
	}
	out := New(Config{Worker: 1}).Batch(wb, nil)
	if len(out) != 1 || out[0].Accepted() || out[0].Reason != messages.ReasonNoTokens {
		t.Fatalf("outcome %+v, want one event rejected no_tokens", out)
	}
}
