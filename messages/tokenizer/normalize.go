package tokenizer

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a segment of text before pre-tokenization.
type normalizer interface {
	normalize(s string) string
}

// forms maps a normalizer's type to its Unicode normalization form.
var forms = map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}

// unicodeForm is one of the four Unicode normalization forms.
type unicodeForm struct{ form norm.Form }

func (f unicodeForm) normalize(s string) string {
	// ASCII is invariant under every form; QuickSpanString proves most other
	// text normal without allocating (IsNormalString allocates).
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii || f.form.QuickSpanString(s) == len(s) {
		return s
	}
	return f.form.String(s)
}

// chain applies normalizers in order.
type chain []normalizer

func (c chain) normalize(s string) string {
	for _, n := range c {
		s = n.normalize(s)
	}
	return s
}
