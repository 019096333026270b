package wire

import (
	"encoding/binary"
	"io"
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
func (x *Decoder) rest() []byte { return x.payload[len(x.payload)-x.r.Len():] }

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
// room for all of them is made at once; the encodings tokenizers' ids take
// (fixint, uint16, uint32) are read inline, others by intAt.
func (x *Decoder) fastTokens(n int) int {
	p, off, i := x.rest(), 0, 0
	start := len(x.tokens)
	x.tokens = slices.Grow(x.tokens, n)[:start+n]
	out := x.tokens[start:]
loop:
	for ; i < len(out) && off < len(p); i++ {
		var v uint64
		switch c := p[off]; {
		case c <= 0x7f:
			v, off = uint64(c), off+1
		case c == 0xcd && off+3 <= len(p):
			v, off = uint64(binary.BigEndian.Uint16(p[off+1:])), off+3
		case c == 0xce && off+5 <= len(p):
			v, off = uint64(binary.BigEndian.Uint32(p[off+1:])), off+5
		default:
			w, size := intAt(p[off:])
			if size == 0 || w > math.MaxUint32 { // negative ints are huge here
				break loop
			}
			v, off = w, off+size
		}
		out[i] = uint32(v)
	}
	x.tokens = x.tokens[:start+i]
	_, _ = x.r.Seek(int64(off), io.SeekCurrent) // within the payload: cannot fail
	return i
}

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
	_, _ = x.r.Seek(int64(off), io.SeekCurrent)
	return i
}
