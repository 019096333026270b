// Package wirefix builds msgpack bytes by hand, one value at a time, with the
// exact width chosen by the caller. Tests use it to write byte-exact engine
// fixtures that do not depend on the decoder they check (or on any msgpack
// library's choice of encoding).
package wirefix

import (
	"encoding/binary"
	"math"
)

// B accumulates msgpack bytes. Methods append one value (or a container
// header) and return the builder, so fixtures read like the value they encode.
type B struct {
	buf []byte
}

// New returns an empty builder.
func New() *B { return &B{} }

// Bytes returns the encoded bytes.
func (b *B) Bytes() []byte { return b.buf }

// Raw appends bytes verbatim (for truncated or corrupt fixtures).
func (b *B) Raw(p ...byte) *B { b.buf = append(b.buf, p...); return b }

// Nil appends nil.
func (b *B) Nil() *B { return b.Raw(0xc0) }

// Bool appends a boolean.
func (b *B) Bool(v bool) *B {
	if v {
		return b.Raw(0xc3)
	}
	return b.Raw(0xc2)
}

// Uint appends v as uint8/16/32/64 when width is 8/16/32/64, or in the
// smallest form (positive fixint first) when width is 0.
func (b *B) Uint(v uint64, width int) *B {
	if width == 0 {
		switch {
		case v < 128:
			return b.Raw(byte(v))
		case v <= math.MaxUint8:
			width = 8
		case v <= math.MaxUint16:
			width = 16
		case v <= math.MaxUint32:
			width = 32
		default:
			width = 64
		}
	}
	switch width {
	case 8:
		return b.Raw(0xcc, byte(v))
	case 16:
		b.Raw(0xcd)
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(v))
	case 32:
		b.Raw(0xce)
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(v))
	default:
		b.Raw(0xcf)
		b.buf = binary.BigEndian.AppendUint64(b.buf, v)
	}
	return b
}

// Int appends v as int8/16/32/64 when width is 8/16/32/64, or in the
// smallest form (fixint first) when width is 0.
func (b *B) Int(v int64, width int) *B {
	if width == 0 {
		switch {
		case v >= 0:
			return b.Uint(uint64(v), 0)
		case v >= -32:
			return b.Raw(byte(int8(v)))
		case v >= math.MinInt8:
			width = 8
		case v >= math.MinInt16:
			width = 16
		case v >= math.MinInt32:
			width = 32
		default:
			width = 64
		}
	}
	switch width {
	case 8:
		return b.Raw(0xd0, byte(v))
	case 16:
		b.Raw(0xd1)
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(v))
	case 32:
		b.Raw(0xd2)
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(v))
	default:
		b.Raw(0xd3)
		b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(v))
	}
	return b
}

// F64 appends a float64.
func (b *B) F64(v float64) *B {
	b.Raw(0xcb)
	b.buf = binary.BigEndian.AppendUint64(b.buf, math.Float64bits(v))
	return b
}

// F32 appends a float32.
func (b *B) F32(v float32) *B {
	b.Raw(0xca)
	b.buf = binary.BigEndian.AppendUint32(b.buf, math.Float32bits(v))
	return b
}

// Str appends a string in its smallest form.
func (b *B) Str(s string) *B {
	n := len(s)
	switch {
	case n < 32:
		b.Raw(0xa0 | byte(n))
	case n <= math.MaxUint8:
		b.Raw(0xd9, byte(n))
	case n <= math.MaxUint16:
		b.Raw(0xda)
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(n))
	default:
		b.Raw(0xdb)
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(n))
	}
	b.buf = append(b.buf, s...)
	return b
}

// Bin appends a byte string (bin8/16/32).
func (b *B) Bin(p []byte) *B {
	n := len(p)
	switch {
	case n <= math.MaxUint8:
		b.Raw(0xc4, byte(n))
	case n <= math.MaxUint16:
		b.Raw(0xc5)
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(n))
	default:
		b.Raw(0xc6)
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(n))
	}
	b.buf = append(b.buf, p...)
	return b
}

// Array appends an array header for n elements (fixarray, array16, array32).
func (b *B) Array(n int) *B {
	switch {
	case n < 16:
		return b.Raw(0x90 | byte(n))
	case n <= math.MaxUint16:
		b.Raw(0xdc)
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(n))
	default:
		b.Raw(0xdd)
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(n))
	}
	return b
}

// Map appends a map header for n entries (fixmap, map16, map32).
func (b *B) Map(n int) *B {
	switch {
	case n < 16:
		return b.Raw(0x80 | byte(n))
	case n <= math.MaxUint16:
		b.Raw(0xde)
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(n))
	default:
		b.Raw(0xdf)
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(n))
	}
	return b
}

// Uints appends an array of unsigned ints in their smallest form.
func (b *B) Uints(vs ...uint64) *B {
	b.Array(len(vs))
	for _, v := range vs {
		b.Uint(v, 0)
	}
	return b
}

// Tokens appends an array of token ids.
func (b *B) Tokens(ts ...uint32) *B {
	b.Array(len(ts))
	for _, t := range ts {
		b.Uint(uint64(t), 0)
	}
	return b
}

// Batch appends a 3-element batch header [ts, events(n), …]: the caller then
// appends n events and the rank (Nil or Int).
func (b *B) Batch(ts float64, n int) *B {
	return b.Array(3).F64(ts).Array(n)
}
