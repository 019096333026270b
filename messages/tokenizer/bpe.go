package tokenizer

import (
	"fmt"
	"math"
)

// byteToRune is GPT-2's byte-level alphabet: printable Latin-1 bytes stand
// for themselves, the other 68 bytes for U+0100 onwards, in byte order.
var byteToRune = func() (m [256]rune) {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			m[b] = rune(b)
		} else {
			m[b] = 256 + n
			n++
		}
	}
	return m
}()

// runeToByte inverts byteToRune; -1 for a rune outside the alphabet.
var runeToByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range byteToRune {
		m[r] = byte(b)
	}
	return m
}()

// ByteLevel writes raw bytes in GPT-2's byte-level alphabet, the form
// tokenizer.json vocabularies and merges store them in.
func ByteLevel(raw string) string {
	out := make([]rune, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		out = append(out, byteToRune[raw[i]])
	}
	return string(out)
}

// decodeByteLevel turns a vocabulary entry back into the raw bytes it
// stands for; ok is false when it holds a rune outside the alphabet.
func decodeByteLevel(s string) (string, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := runeToByte[r]
		if !ok {
			return "", false
		}
		out = append(out, b)
	}
	return string(out), true
}

const noMerge = math.MaxUint32

// bpe is the model: the vocabulary over raw bytes and the merge table.
type bpe struct {
	vocab        map[string]uint32 // raw bytes → id
	byteID       [256]uint32       // the id of each single byte
	merges       pairTable         // (left id, right id) → rank, merged id
	ignoreMerges bool              // a piece found whole in vocab is one token
	size         int
}

func newBPE(vocab map[string]uint32, merges [][2]string, ignoreMerges bool) (*bpe, error) {
	if len(vocab) == 0 {
		return nil, fmt.Errorf("model.vocab is empty")
	}
	b := &bpe{vocab: make(map[string]uint32, len(vocab)), ignoreMerges: ignoreMerges, size: len(vocab)}
	for s, id := range vocab {
		if raw, ok := decodeByteLevel(s); ok {
			b.vocab[raw] = id
		}
	}
	for c := 0; c < 256; c++ {
		id, ok := b.vocab[string([]byte{byte(c)})]
		if !ok {
			return nil, fmt.Errorf("model.vocab lacks byte 0x%02x (%q): not a byte-level vocabulary", c, byteToRune[c])
		}
		b.byteID[c] = id
	}
	b.merges = newPairTable(len(merges))
	for rank, m := range merges {
		l, okl := vocab[m[0]]
		r, okr := vocab[m[1]]
		id, okm := vocab[m[0]+m[1]]
		if !okl || !okr || !okm {
			return nil, fmt.Errorf("model.merges[%d] %q %q: a symbol or the merge is not in the vocabulary", rank, m[0], m[1])
		}
		b.merges.put(l, r, uint32(rank), id)
	}
	return b, nil
}

// scratch is one encoding's reusable working memory.
type scratch struct {
	syms  []uint32
	ranks []uint32
	ids   []uint32
}

// appendPiece appends the ids of one pre-token (raw bytes).
func (b *bpe) appendPiece(dst []uint32, piece string, s *scratch) []uint32 {
	if len(piece) == 1 {
		return append(dst, b.byteID[piece[0]])
	}
	if b.ignoreMerges {
		if id, ok := b.vocab[piece]; ok {
			return append(dst, id)
		}
	}
	syms := s.syms[:0]
	for i := 0; i < len(piece); i++ {
		syms = append(syms, b.byteID[piece[i]])
	}
	ranks := s.ranks[:0]
	for i := 0; i+1 < len(syms); i++ {
		r, _ := b.merges.get(syms[i], syms[i+1])
		ranks = append(ranks, r)
	}
	// Merge the lowest-ranked adjacent pair (the leftmost among equals)
	// until no adjacent pair has a merge: what the reference's priority
	// queue ordered by (rank, position) does.
	for len(syms) > 1 {
		best, at := uint32(noMerge), -1
		for i, r := range ranks {
			if r < best {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		_, id := b.merges.get(syms[at], syms[at+1])
		syms[at] = id
		syms = append(syms[:at+1], syms[at+2:]...)
		ranks = append(ranks[:at], ranks[at+1:]...)
		if at > 0 {
			ranks[at-1], _ = b.merges.get(syms[at-1], syms[at])
		}
		if at < len(ranks) {
			ranks[at], _ = b.merges.get(syms[at], syms[at+1])
		}
	}
	s.syms, s.ranks = syms, ranks
	return append(dst, syms...)
}

// pairTable is an open-addressing hash table from a pair of ids to the
// merge's rank and result: the merge loop's one lookup, kept flat (no
// pointers, one probe sequence) because it dominates encoding time.
type pairTable struct {
	slots []pairSlot
	mask  uint64
}

type pairSlot struct {
	key  uint64 // left<<32 | right, +1 so that 0 marks an empty slot
	rank uint32
	id   uint32
}

func newPairTable(n int) pairTable {
	size := 1
	for size < 2*n+2 {
		size <<= 1
	}
	return pairTable{slots: make([]pairSlot, size), mask: uint64(size - 1)}
}

func pairHash(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	return k
}

func (t *pairTable) put(l, r, rank, id uint32) {
	k := uint64(l)<<32 | uint64(r) + 1
	for i := pairHash(k) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.key == 0 {
			*s = pairSlot{key: k, rank: rank, id: id}
			return
		}
		if s.key == k {
			return // a duplicate merge: the first (lowest rank) stays
		}
	}
}

// get returns the rank and merged id of (l, r), or noMerge.
func (t *pairTable) get(l, r uint32) (rank, id uint32) {
	k := uint64(l)<<32 | uint64(r) + 1
	for i := pairHash(k) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.key == k {
			return s.rank, s.id
		}
		if s.key == 0 {
			return noMerge, 0
		}
	}
}
