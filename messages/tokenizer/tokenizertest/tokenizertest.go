// Package tokenizertest builds small tokenizer.json files for tests: a
// byte-level BPE whose vocabulary is the 256 bytes (ids 0-255, in byte
// order) plus the merges asked for — cheap to load, and certain to
// disagree with a real model's tokenizer.
package tokenizertest

import (
	"encoding/json"
	"fmt"

	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

// File is a tokenizer.json's parts. Merges are pairs of raw-byte strings
// (the byte-level alphabet is applied here); each merge's result gets the
// next id after the bytes. Nil components are written as null, except
// PreTokenizer, which defaults to a plain ByteLevel step.
type File struct {
	Merges        [][2]string
	AddedTokens   []map[string]any
	Normalizer    any
	PreTokenizer  any
	PostProcessor any
	ModelType     string // default "BPE"
	// StringMerges writes merges in the older "a b" form.
	StringMerges bool
}

// JSON returns the file's bytes.
func (f File) JSON() []byte {
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[tokenizer.ByteLevel(string([]byte{byte(b)}))] = b
	}
	var merges []any
	for _, m := range f.Merges {
		l, r := tokenizer.ByteLevel(m[0]), tokenizer.ByteLevel(m[1])
		if _, ok := vocab[l+r]; !ok {
			vocab[l+r] = len(vocab)
		}
		if f.StringMerges {
			merges = append(merges, l+" "+r)
		} else {
			merges = append(merges, []string{l, r})
		}
	}
	if merges == nil {
		merges = []any{}
	}
	pre := f.PreTokenizer
	if pre == nil {
		pre = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}
	}
	typ := f.ModelType
	if typ == "" {
		typ = "BPE"
	}
	added := f.AddedTokens
	if added == nil {
		added = []map[string]any{}
	}
	out, err := json.Marshal(map[string]any{
		"version":        "1.0",
		"added_tokens":   added,
		"normalizer":     f.Normalizer,
		"pre_tokenizer":  pre,
		"post_processor": f.PostProcessor,
		"model":          map[string]any{"type": typ, "vocab": vocab, "merges": merges, "ignore_merges": false},
	})
	if err != nil {
		panic(fmt.Sprintf("tokenizertest: %v", err))
	}
	return out
}

// Added is an added token entry.
func Added(id int, content string, special bool) map[string]any {
	return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": special}
}
