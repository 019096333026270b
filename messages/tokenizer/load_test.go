package tokenizer_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/tokenizer"
	"github.com/kvrouter/kvrouter/messages/tokenizer/tokenizertest"
)

func parse(t *testing.T, f tokenizertest.File) *tokenizer.Tokenizer {
	t.Helper()
	tk, err := tokenizer.Parse(f.JSON())
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func encode(t *testing.T, tk *tokenizer.Tokenizer, s string, special bool) []uint32 {
	t.Helper()
	ids, err := tk.Encode(s, special)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestMergeOrder: merges apply by rank, lowest first, leftmost among
// equals; a merge's result can merge again.
func TestMergeOrder(t *testing.T) {
	for _, strs := range []bool{false, true} {
		// ids in merge order: "bc"=256, "ab"=257, "abc"=258
		tk := parse(t, tokenizertest.File{Merges: [][2]string{{"b", "c"}, {"a", "b"}, {"ab", "c"}}, StringMerges: strs})
		// "abc": (b,c) ranks first → a + bc; ("a","bc") is no merge.
		if got := encode(t, tk, "abc", false); !slices.Equal(got, []uint32{'a', 256}) {
			t.Fatalf("abc: %v", got)
		}
		if got := encode(t, tk, "abab", false); !slices.Equal(got, []uint32{257, 257}) {
			t.Fatalf("abab: %v", got)
		}
	}
	tk := parse(t, tokenizertest.File{Merges: [][2]string{{"a", "b"}, {"ab", "c"}}})
	if got := encode(t, tk, "abcab", false); !slices.Equal(got, []uint32{257, 256}) {
		t.Fatalf("abcab: %v", got)
	}
}

// TestSpecialTokensAndTemplate: added tokens are cut out whole, the
// longest at a position; a TemplateProcessing post-processor adds BOS only
// when asked.
func TestSpecialTokensAndTemplate(t *testing.T) {
	tk := parse(t, tokenizertest.File{
		AddedTokens: []map[string]any{tokenizertest.Added(300, "<|s|>", true), tokenizertest.Added(301, "<|s|>x", false)},
		PostProcessor: map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<|s|>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<|s|>": map[string]any{"id": "<|s|>", "ids": []int{300}, "tokens": []string{"<|s|>"}}}},
	})
	if got := encode(t, tk, "a<|s|>b<|s|>x", false); !slices.Equal(got, []uint32{'a', 300, 'b', 301}) {
		t.Fatalf("added tokens: %v", got)
	}
	if got := encode(t, tk, "a", true); !slices.Equal(got, []uint32{300, 'a'}) {
		t.Fatalf("with BOS: %v", got)
	}
}

// TestNormalizerNFC: with NFC, a decomposed é encodes as the composed one.
func TestNormalizerNFC(t *testing.T) {
	tk := parse(t, tokenizertest.File{Normalizer: map[string]any{"type": "NFC"}})
	if a, b := encode(t, tk, "e\u0301", false), encode(t, tk, "é", false); !slices.Equal(a, b) {
		t.Fatalf("NFC: %v vs %v", a, b)
	}
	raw := parse(t, tokenizertest.File{})
	if a, b := encode(t, raw, "e\u0301", false), encode(t, raw, "é", false); slices.Equal(a, b) {
		t.Fatal("without a normalizer the forms must differ")
	}
}

// TestRefusals: whatever would not be reproduced exactly is refused at load
// with the reason.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		f    tokenizertest.File
		want string
	}{
		{tokenizertest.File{ModelType: "WordPiece"}, "only byte-level BPE"},
		{tokenizertest.File{PreTokenizer: map[string]any{"type": "Metaspace"}}, `"Metaspace" is not supported`},
		{tokenizertest.File{PreTokenizer: map[string]any{"type": "Whitespace"}}, "not supported"},
		{tokenizertest.File{PreTokenizer: map[string]any{"type": "Split", "pattern": map[string]any{"Regex": " "}, "behavior": "Isolated"}}, "no ByteLevel step"},
		{tokenizertest.File{PreTokenizer: map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": " "}, "behavior": "Removed"},
			map[string]any{"type": "ByteLevel"}}}}, "only Isolated"},
		{tokenizertest.File{Normalizer: map[string]any{"type": "Lowercase"}}, `"Lowercase" is not supported`},
		{tokenizertest.File{PostProcessor: map[string]any{"type": "BertProcessing"}}, "not supported"},
		{tokenizertest.File{AddedTokens: []map[string]any{{"id": 300, "content": "<x>", "lstrip": true}}}, "lstrip"},
		{tokenizertest.File{PreTokenizer: map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(?<=a"}, "behavior": "Isolated"},
			map[string]any{"type": "ByteLevel"}}}}, "Split pattern"},
	} {
		_, err := tokenizer.Parse(c.f.JSON())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
	if _, err := tokenizer.Parse([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]}, "pre_tokenizer":{"type":"ByteLevel"}}`)); err == nil || !strings.Contains(err.Error(), "lacks byte") {
		t.Errorf("a vocabulary without every byte: %v", err)
	}
	if _, err := tokenizer.Parse([]byte{0x1f, 0x8b, 0}); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("a broken gzip: %v", err)
	}
}

// TestSplitStringPattern: a Split with a literal String pattern isolates it.
func TestSplitStringPattern(t *testing.T) {
	tk := parse(t, tokenizertest.File{Merges: [][2]string{{"a", "+"}}, PreTokenizer: map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"String": "+"}, "behavior": "Isolated"},
		map[string]any{"type": "ByteLevel", "use_regex": false}}}})
	// "a+" would merge, but "+" is its own piece.
	if got := encode(t, tk, "a+", false); !slices.Equal(got, []uint32{'a', '+'}) {
		t.Fatalf("a+: %v", got)
	}
}
