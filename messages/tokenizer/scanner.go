package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The two Split patterns of the Llama-3 / cl100k and Qwen2/Qwen3 families,
// as they appear in tokenizer.json. They differ only in how many digits one
// piece may hold.
const (
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwenPattern   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// scanner matches the cl100k-family pattern by hand: the alternatives in
// order, each the way the backtracking engine resolves it, over runes
// classified as letter (\p{L}), number (\p{N}), space (\s) or other. It
// allocates nothing and runs several times faster than regexp2 on the same
// pattern. Every rune is matched by some alternative, so there are no gaps.
type scanner struct {
	maxDigits int // \p{N}{1,maxDigits}
}

const (
	clLetter = 1 << iota
	clNumber
	clSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := rune(0); c < utf8.RuneSelf; c++ {
		t[c] = slowClass(c)
	}
	return t
}()

func slowClass(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		return clLetter
	case unicode.IsNumber(r):
		return clNumber
	case unicode.IsSpace(r):
		return clSpace
	}
	return 0
}

// class returns the class and width of the rune at s[i].
func class(s string, i int) (uint8, rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], rune(c), 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return slowClass(r), r, w
}

func (sc scanner) appendEnds(ends []int, s string, _ *splitScratch) ([]int, error) {
	for i := 0; i < len(s); {
		i = sc.matchAt(s, i)
		ends = append(ends, i)
	}
	return ends, nil
}

// matchAt returns the end of the pattern's match starting at s[i].
func (sc scanner) matchAt(s string, i int) int {
	cl, r, w := class(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if n := contraction(s[i+1:]); n > 0 {
			return i + 1 + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if cl == clLetter {
		return sc.run(s, i+w, clLetter, -1)
	}
	if cl != clNumber && r != '\r' && r != '\n' && i+w < len(s) {
		if c2, _, _ := class(s, i+w); c2 == clLetter {
			return sc.run(s, i+w, clLetter, -1)
		}
	}
	// \p{N}{1,n}
	if cl == clNumber {
		return sc.run(s, i, clNumber, sc.maxDigits)
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	j := i
	if r == ' ' {
		j++
	}
	if j < len(s) {
		if c2, _, _ := class(s, j); c2 == 0 {
			j = sc.run(s, j, 0, -1)
			for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
				j++
			}
			return j
		}
	}
	// Here s[i] is a space. \s*[\r\n]+ ends after the run's last CR or LF.
	end, lastNL := i, -1
	for end < len(s) {
		c2, r2, w2 := class(s, end)
		if c2 != clSpace {
			break
		}
		if r2 == '\r' || r2 == '\n' {
			lastNL = end
		}
		end += w2
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	// \s+(?!\S): the whole run at the end of text, else all but its last rune.
	if end == len(s) {
		return end
	}
	if _, lw := utf8.DecodeLastRuneInString(s[i:end]); end-lw > i {
		return end - lw
	}
	// \s+
	return end
}

// run extends a run of runes of class cl from s[j], at most max runes
// (max < 0: no limit), and returns its end.
func (scanner) run(s string, j int, cl uint8, max int) int {
	for n := 0; j < len(s) && n != max; n++ {
		c, _, w := class(s, j)
		if c != cl {
			break
		}
		j += w
	}
	return j
}

// contraction returns the length of s, d, m, t, re, ve or ll (any case;
// ſ folds to s) at the start of rest, or 0.
func contraction(rest string) int {
	if rest == "" {
		return 0
	}
	r, w := utf8.DecodeRuneInString(rest)
	if r == 'ſ' {
		return w
	}
	next := func(want byte) int {
		if len(rest) > 1 && rest[1]|0x20 == want {
			return 2
		}
		return 0
	}
	switch r | 0x20 {
	case 's', 't', 'm', 'd':
		if r < utf8.RuneSelf {
			return 1
		}
	case 'r', 'v':
		if r < utf8.RuneSelf {
			return next('e')
		}
	case 'l':
		if r < utf8.RuneSelf {
			return next('l')
		}
	}
	return 0
}
