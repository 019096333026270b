package wire

import (
	"encoding/binary"
	"math"
	"slices"
)

// The two arrays that make up almost every byte of a batch — token ids and
// block hashes — are read by the loops below, straight from the payload,
// while they hold integer encodings. The first value of any other type hands
// over to the general (library) path at the same position, so the result is
// identical; the fast path only skips the per-value peek/decode calls.
// Measured in bench/: ~8× on a vLLM batch.

// rest returns the payload bytes not yet consumed.
func (x *Decoder) rest() []byte { return x.payload[x.pos:] }

// intAt decodes the msgpack integer at the start of p as its 64-bit
// two's-complement bit pattern; n is its encoded size, 0 when p does not
// start with a complete integer.
func intAt(p []byte) (v uint64, n int) {
	if len(p) == 0 {
		return 0, 0
	}
	switch c := p[0]; {
	case c <= 0x7f:
		return uint64(c), 1
	case c >= 0xe0: // negative fixint
		return uint64(int64(int8(c))), 1
	case c == 0xcc && len(p) >= 2:
		return uint64(p[1]), 2
	case c == 0xcd && len(p) >= 3:
		return uint64(binary.BigEndian.Uint16(p[1:])), 3
	case c == 0xce && len(p) >= 5:
		return uint64(binary.BigEndian.Uint32(p[1:])), 5
	case (c == 0xcf || c == 0xd3) && len(p) >= 9:
		return binary.BigEndian.Uint64(p[1:]), 9
	case c == 0xd0 && len(p) >= 2:
		return uint64(int64(int8(p[1]))), 2
	case c == 0xd1 && len(p) >= 3:
		return uint64(int64(int16(binary.BigEndian.Uint16(p[1:])))), 3
	case c == 0xd2 && len(p) >= 5:
		return uint64(int64(int32(binary.BigEndian.Uint32(p[1:])))), 5
	}
	return 0, 0
}

// fastTokens appends up to n token ids (integers in [0, 2^32)) and returns
// how many it consumed. n is within MaxTokens (the caller checks), so the
// room for all of them is made at once. The encodings tokenizers' ids take
// (fixint, uint8, uint16, uint32: a vocabulary of 100k–200k ids mixes the
// last two at random, so a switch on them mispredicts about every other
// id) are read without a branch on the encoding: 8 bytes are loaded at the
// id and tokenCodes says how many are its own and where its value sits.
// Other encodings, and the last 7 bytes of the payload, go through intAt.
func (x *Decoder) fastTokens(n int) int {
	p, off, i := x.rest(), 0, 0
	start := len(x.tokens)
	x.tokens = slices.Grow(x.tokens, n)[:start+n]
	out := x.tokens[start:]
	for ; i < len(out); i++ {
		if off+8 <= len(p) {
			if c := tokenCodes[p[off]]; c != 0 {
				w := binary.BigEndian.Uint64(p[off:])
				out[i] = uint32(w>>(c>>8&63)) & uint32(c>>32)
				off += int(c & 0xff)
				continue
			}
		}
		w, size := intAt(p[off:])
		if size == 0 || w > math.MaxUint32 { // negative ints are huge here
			break
		}
		out[i] = uint32(w)
		off += size
	}
	x.tokens = x.tokens[:start+i]
	x.advance(off)
	return i
}

// tokenCodes holds, for each first byte of a msgpack integer that fastTokens
// reads without a branch, the encoding's size in bytes (bits 0–7), the
// right shift that brings its value to the low bits of the 8 bytes loaded
// big-endian at it (bits 8–15), and the value's mask (bits 32–63); 0 for
// every other byte.
var tokenCodes = func() (t [256]uint64) {
	code := func(size, shift, mask uint64) uint64 { return mask<<32 | shift<<8 | size }
	for c := range 0x80 { // positive fixint: the byte itself
		t[c] = code(1, 56, 0x7f)
	}
	t[0xcc] = code(2, 48, 0xff)
	t[0xcd] = code(3, 40, 0xffff)
	t[0xce] = code(5, 24, 0xffffffff)
	return t
}()

// fastHashes appends up to n block hashes encoded as integers and returns
// how many it consumed.
func (x *Decoder) fastHashes(n int) int {
	p, off, i := x.rest(), 0, 0
	for ; i < n; i++ {
		v, size := intAt(p[off:])
		if size == 0 {
			break
		}
		x.hashes = append(x.hashes, v)
		off += size
	}
	x.advance(off)
	return i
}
