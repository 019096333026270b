package wire

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// A batch says which encodings its events used: what engine detection
// reads (messages/engine).
func TestBatchLayout(t *testing.T) {
	stored := func(b *wirefix.B) *wirefix.B {
		return b.Array(8).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil()
	}
	for _, c := range []struct {
		name  string
		build func(b *wirefix.B)
		want  Layout
	}{
		{"heartbeat", func(b *wirefix.B) { b.Batch(1, 0).Nil() }, 0},
		{"map event", func(b *wirefix.B) { b.Batch(1, 1).Map(1).Str("type").Str(TagCleared).Nil() }, LayoutMap},
		{"positional event", func(b *wirefix.B) { b.Batch(1, 1).Array(1).Str(TagCleared).Nil() }, LayoutPositional},
		{"both", func(b *wirefix.B) {
			b.Batch(1, 2).Array(1).Str(TagCleared).Map(1).Str("type").Str(TagCleared).Nil()
		}, LayoutMap | LayoutPositional},
		{"vLLM lora_name at 7", func(b *wirefix.B) { stored(b.Batch(1, 1)).Str("sql").Nil() }, LayoutPositional},
		{"SGLang metadata at 7", func(b *wirefix.B) {
			stored(b.Batch(1, 1)).Map(1).Str("session_id").Str("s").Nil()
		}, LayoutPositional | LayoutMetadata},
		{"SGLang metadata at 14", func(b *wirefix.B) {
			b.Batch(1, 1).Array(15).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().Nil().
				Nil().Nil().Nil().Nil().Nil().Nil().Map(1).Str("cache_salt").Str("x").Nil()
		}, LayoutPositional | LayoutMetadata},
		{"SGLang metadata key", func(b *wirefix.B) {
			b.Batch(1, 1).Map(5).Str("type").Str("BlockStored").Str("block_hashes").Uints(5).Str("token_ids").Tokens(1, 2).
				Str("block_size").Uint(2, 0).Str("metadata").Map(1).Str("cache_salt").Str("x").Nil()
		}, LayoutMap | LayoutMetadata},
	} {
		b := wirefix.New()
		c.build(b)
		got, err := NewDecoder(Limits{}, nil).Decode(b.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Layout != c.want {
			t.Errorf("%s: layout %03b, want %03b", c.name, got.Layout, c.want)
		}
		if got.Layout.Has(LayoutMetadata) != (c.want&LayoutMetadata != 0) {
			t.Errorf("%s: Has(LayoutMetadata) wrong", c.name)
		}
	}
}
