package tokenizer

import (
	"strings"
	"sync"
)

// Tokenizer turns text into the token ids of one model. It is immutable
// once loaded and safe for concurrent use; each call borrows pooled working
// memory, so encoding a warmed-up text allocates only the result.
type Tokenizer struct {
	bpe         *bpe
	normalize   normalizer // nil: none
	splits      []splitter // applied in order, each to the previous pieces
	prefixSpace bool       // ByteLevel add_prefix_space
	prefix      []uint32   // ids the post-processor puts first (e.g. BOS)
	suffix      []uint32   // ids it puts last
	raw         *addedTokens
	normalized  *addedTokens
	pool        sync.Pool // *encoder
}

// VocabSize is the number of entries in the model's vocabulary (added
// tokens not included).
func (t *Tokenizer) VocabSize() int { return t.bpe.size }

// Encode returns the ids of text. With addSpecial, the ids the file's
// post-processor adds (Llama-3's <|begin_of_text|>) are included, as an
// engine's tokenizer does for a completion prompt by default.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]uint32, error) {
	return t.AppendEncode(nil, text, addSpecial)
}

// AppendEncode appends the ids of text to dst (see Encode). An error comes
// only from a pattern the backtracking engine gives up on.
func (t *Tokenizer) AppendEncode(dst []uint32, text string, addSpecial bool) ([]uint32, error) {
	e, _ := t.pool.Get().(*encoder)
	if e == nil {
		e = &encoder{words: map[string]span{}}
	}
	defer t.pool.Put(e)
	if addSpecial {
		dst = append(dst, t.prefix...)
	}
	dst, err := t.cutAdded(dst, text, false, e)
	if addSpecial {
		dst = append(dst, t.suffix...)
	}
	return dst, err
}

// cutAdded cuts the added tokens out of s — those matched on the raw text,
// or with afterNorm those matched on normalized text — and encodes the
// segments between them.
func (t *Tokenizer) cutAdded(dst []uint32, s string, afterNorm bool, e *encoder) ([]uint32, error) {
	set := t.raw
	if afterNorm {
		set = t.normalized
	}
	var err error
	for s != "" && err == nil {
		start, n, id := set.next(s)
		if start < 0 {
			start = len(s)
		}
		if seg := s[:start]; seg != "" && afterNorm {
			dst, err = t.encodeText(dst, seg, e)
		} else if seg != "" {
			if t.normalize != nil {
				seg = t.normalize.normalize(seg)
			}
			dst, err = t.cutAdded(dst, seg, true, e)
		}
		if n > 0 {
			dst = append(dst, id)
		}
		s = s[start+n:]
	}
	return dst, err
}

// encodeText pre-tokenizes a plain segment and runs BPE on each piece.
func (t *Tokenizer) encodeText(dst []uint32, seg string, e *encoder) ([]uint32, error) {
	if t.prefixSpace && seg[0] != ' ' {
		seg = " " + seg
	}
	e.ends = append(e.ends[:0], len(seg))
	for _, sp := range t.splits {
		e.next = e.next[:0]
		start := 0
		for _, end := range e.ends {
			var err error
			before := len(e.next)
			if e.next, err = sp.appendEnds(e.next, seg[start:end], &e.split); err != nil {
				return dst, err
			}
			for k := before; k < len(e.next); k++ {
				e.next[k] += start
			}
			start = end
		}
		e.ends, e.next = e.next, e.ends
	}
	start := 0
	for _, end := range e.ends {
		dst = e.appendWord(dst, t.bpe, seg[start:end])
		start = end
	}
	return dst, nil
}

// encoder is one goroutine's working memory: scratch slices and a cache of
// the ids of pieces seen before (most text repeats its words).
type encoder struct {
	ends, next []int
	split      splitScratch
	bpe        scratch
	words      map[string]span
	arena      []uint32
}

type span struct{ off, n uint32 }

// Bounds of one encoder's word cache; when either is reached it starts over.
const (
	maxCachedWords = 1 << 15
	maxArenaIDs    = 1 << 18
	maxCachedPiece = 64 // longer pieces (whitespace runs, long words) are not cached
)

func (e *encoder) appendWord(dst []uint32, b *bpe, piece string) []uint32 {
	if len(piece) == 1 {
		return append(dst, b.byteID[piece[0]])
	}
	if sp, ok := e.words[piece]; ok {
		return append(dst, e.arena[sp.off:sp.off+sp.n]...)
	}
	before := len(dst)
	dst = b.appendPiece(dst, piece, &e.bpe)
	if len(piece) <= maxCachedPiece {
		if len(e.words) >= maxCachedWords || len(e.arena)+len(dst)-before > maxArenaIDs {
			clear(e.words)
			e.arena = e.arena[:0]
		}
		e.words[strings.Clone(piece)] = span{uint32(len(e.arena)), uint32(len(dst) - before)}
		e.arena = append(e.arena, dst[before:]...)
	}
	return dst
}
