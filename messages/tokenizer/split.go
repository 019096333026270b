package tokenizer

import (
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// splitter is one Split pre-tokenizer step with behavior Isolated: every
// match is a piece and so is every gap between matches. appendEnds appends
// the end offset (bytes) of each piece of s, in order; the pieces cover s.
type splitter interface {
	appendEnds(ends []int, s string, sc *splitScratch) ([]int, error)
}

// splitScratch is a splitter's reusable working memory.
type splitScratch struct {
	runes []rune
	offs  []int
}

// gpt2Pattern is ByteLevel's own split (use_regex: true), from GPT-2.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// regexpQuote escapes a Split "String" pattern for regexp2.
func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

// newRegexSplitter compiles a Split pattern. The Llama-3 / cl100k and the
// Qwen2/Qwen3 patterns get a hand-written scanner that matches exactly what
// the regex matches (TestScannerMatchesRegex); any other goes to regexp2,
// a backtracking engine with the look-around these patterns use.
func newRegexSplitter(pattern string) (splitter, error) {
	switch pattern {
	case cl100kPattern:
		return scanner{maxDigits: 3}, nil
	case qwenPattern:
		return scanner{maxDigits: 1}, nil
	}
	return compileRegex(pattern)
}

// matchTimeout bounds one regexp2 scan of a text segment.
const matchTimeout = 2 * time.Second

// regexSplitter runs a pattern through regexp2.
type regexSplitter struct{ re *regexp2.Regexp }

func compileRegex(pattern string) (regexSplitter, error) {
	re, err := regexp2.Compile(pattern)
	if err != nil {
		return regexSplitter{}, fmt.Errorf("Split pattern %q: %w", pattern, err)
	}
	// A backtracking engine can take long on a hostile text; past this
	// the encode fails (the caller falls back to the engine) instead.
	re.MatchTimeout = matchTimeout
	return regexSplitter{re}, nil
}

func (r regexSplitter) appendEnds(ends []int, s string, sc *splitScratch) ([]int, error) {
	sc.runes, sc.offs = sc.runes[:0], sc.offs[:0]
	for i, c := range s {
		sc.runes = append(sc.runes, c)
		sc.offs = append(sc.offs, i)
	}
	sc.offs = append(sc.offs, len(s))
	last := 0
	err := r.re.FindRunesMatches(sc.runes, 0, func(m regexp2.MatchView) bool {
		at, n, _ := m.GroupRange(0)
		if n == 0 {
			return true
		}
		if start := sc.offs[at]; start > last {
			ends = append(ends, start)
		}
		last = sc.offs[at+n]
		ends = append(ends, last)
		return true
	})
	if err != nil {
		return ends, err
	}
	if last < len(s) {
		ends = append(ends, len(s))
	}
	return ends, nil
}

// decode returns the rune at s[i] and its width (U+FFFD for a bad byte).
func decode(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}
