package tokenizer

import (
	"fmt"
	"sort"
	"strings"
)

// addedTokens finds a tokenizer's added tokens (special ones such as
// <|im_start|> and plain ones such as <think>) in text: they are cut out
// before normalization and BPE and map straight to their ids, leftmost
// first and, at one position, longest first — as the reference does.
type addedTokens struct {
	first [256]bool          // a token starts with this byte
	byLen map[byte][]addedID // candidates per first byte, longest first
}

type addedID struct {
	content string
	id      uint32
}

// newAddedTokens splits the file's added tokens into those matched on the
// raw text and those matched after normalization ("normalized": true).
func newAddedTokens(list []addedJSON) (raw, normalized *addedTokens, err error) {
	raw, normalized = &addedTokens{byLen: map[byte][]addedID{}}, &addedTokens{byLen: map[byte][]addedID{}}
	for _, a := range list {
		if a.Content == "" {
			return nil, nil, fmt.Errorf("added token %d has no content", a.ID)
		}
		if a.SingleWord || a.LStrip || a.RStrip {
			return nil, nil, fmt.Errorf("added token %q: single_word, lstrip and rstrip are not supported", a.Content)
		}
		set := raw
		if a.Normalized {
			set = normalized
		}
		c := a.Content[0]
		set.first[c] = true
		set.byLen[c] = append(set.byLen[c], addedID{a.Content, a.ID})
	}
	for _, set := range []*addedTokens{raw, normalized} {
		for _, l := range set.byLen {
			sort.SliceStable(l, func(i, j int) bool { return len(l[i].content) > len(l[j].content) })
		}
	}
	return raw, normalized, nil
}

// next finds the first added token in s: its start, length and id; start
// is -1 when there is none.
func (a *addedTokens) next(s string) (start, n int, id uint32) {
	if len(a.byLen) == 0 {
		return -1, 0, 0
	}
	for i := 0; i < len(s); i++ {
		if !a.first[s[i]] {
			continue
		}
		for _, c := range a.byLen[s[i]] {
			if strings.HasPrefix(s[i:], c.content) {
				return i, len(c.content), c.id
			}
		}
	}
	return -1, 0, 0
}
