package wire

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// errStructural wraps errors after which the byte stream cannot be followed
// (truncation, bad lengths, unknown codes).
type structuralError struct {
	reason messages.Reason
	detail string
}

func (e *structuralError) Error() string { return e.detail }

// fieldError reports a value that was fully consumed but is not acceptable;
// decoding continues with the next value.
type fieldError struct {
	reason messages.Reason
	detail string
}

func (e *fieldError) Error() string { return e.detail }

func truncated(what string, err error) error {
	return &structuralError{messages.ReasonTruncated, fmt.Sprintf("%s: %v", what, err)}
}

func malformed(format string, args ...any) error {
	return &fieldError{messages.ReasonMalformed, fmt.Sprintf(format, args...)}
}

func overLimit(format string, args ...any) error {
	return &fieldError{messages.ReasonLimitExceeded, fmt.Sprintf(format, args...)}
}

// isStructural reports whether err is a structural error. Errors of this
// package are never wrapped, so a type assertion suffices (errors.As would
// allocate on every call of the hot path).
func isStructural(err error) bool {
	_, ok := err.(*structuralError)
	return ok
}

// class is the coarse msgpack type of a value.
type class uint8

const (
	classNil class = iota
	classBool
	classInt
	classFloat
	classStr
	classBin
	classArray
	classMap
	classExt
	classInvalid
)

var classNames = [...]string{"nil", "bool", "int", "float", "str", "bin", "array", "map", "ext", "invalid"}

func (c class) String() string { return classNames[c] }

func classify(c byte) class { return classes[c] }

// classes holds every code byte's class (classOf), so classify is one load.
var classes = func() (t [256]class) {
	for c := range t {
		t[c] = classOf(byte(c))
	}
	return t
}()

// classOf is the msgpack spec's classification of a code byte.
func classOf(c byte) class {
	switch {
	case msgpcode.IsFixedNum(c):
		return classInt
	case msgpcode.IsFixedMap(c):
		return classMap
	case msgpcode.IsFixedArray(c):
		return classArray
	case msgpcode.IsFixedString(c):
		return classStr
	}
	switch c {
	case msgpcode.Nil:
		return classNil
	case msgpcode.False, msgpcode.True:
		return classBool
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return classInt
	case msgpcode.Float, msgpcode.Double:
		return classFloat
	case msgpcode.Str8, msgpcode.Str16, msgpcode.Str32:
		return classStr
	case msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32:
		return classBin
	case msgpcode.Array16, msgpcode.Array32:
		return classArray
	case msgpcode.Map16, msgpcode.Map32:
		return classMap
	case msgpcode.FixExt1, msgpcode.FixExt2, msgpcode.FixExt4, msgpcode.FixExt8, msgpcode.FixExt16,
		msgpcode.Ext8, msgpcode.Ext16, msgpcode.Ext32:
		return classExt
	}
	return classInvalid
}

// peekCode returns the next byte without consuming it, straight from the
// payload (the library's PeekCode reads and unreads it through the reader).
func (x *Decoder) peekCode() (byte, error) {
	if x.pos >= len(x.payload) {
		return 0, io.EOF
	}
	return x.payload[x.pos], nil
}

// peek returns the class of the next value without consuming it.
func (x *Decoder) peek() (class, error) {
	c, err := x.peekCode()
	if err != nil {
		return classInvalid, truncated("reading value", err)
	}
	cl := classify(c)
	if cl == classInvalid {
		return cl, &structuralError{messages.ReasonMalformed, fmt.Sprintf("invalid msgpack code 0x%02x", c)}
	}
	return cl, nil
}

// arrayLen reads an array header whose elements must fit in what remains.
func (x *Decoder) arrayLen() (int, error) {
	n, err := x.containerLen(0x90, 0xdc)
	if err != nil {
		return 0, truncated("reading array length", err)
	}
	if n < 0 {
		return 0, nil
	}
	if n > x.left() {
		return 0, &structuralError{messages.ReasonTruncated,
			fmt.Sprintf("array declares %d elements but %d bytes remain", n, x.left())}
	}
	return n, nil
}

// mapLen reads a map header whose entries must fit in what remains.
func (x *Decoder) mapLen() (int, error) {
	n, err := x.containerLen(0x80, 0xde)
	if err != nil {
		return 0, truncated("reading map length", err)
	}
	if n < 0 {
		return 0, nil
	}
	if n > x.left()/2 {
		return 0, &structuralError{messages.ReasonTruncated,
			fmt.Sprintf("map declares %d entries but %d bytes remain", n, x.left())}
	}
	return n, nil
}

// containerLen reads an array (fix code fix, 16-bit code c16) or map
// header, nil as -1. A complete header is read in place from the payload;
// anything else goes through the library, which words its errors.
func (x *Decoder) containerLen(fix, c16 byte) (int, error) {
	p := x.rest()
	if len(p) > 0 {
		hdr, n := 0, 0
		switch c := p[0]; {
		case c&0xf0 == fix:
			hdr, n = 1, int(c&0x0f)
		case c == msgpcode.Nil:
			hdr, n = 1, -1
		case c == c16 && len(p) >= 3:
			hdr, n = 3, int(binary.BigEndian.Uint16(p[1:]))
		case c == c16+1 && len(p) >= 5:
			hdr, n = 5, int(binary.BigEndian.Uint32(p[1:]))
		}
		if hdr > 0 {
			x.advance(hdr)
			return n, nil
		}
	}
	if fix == 0x90 {
		return lib(x, (*msgpack.Decoder).DecodeArrayLen)
	}
	return lib(x, (*msgpack.Decoder).DecodeMapLen)
}

// fixstr consumes a complete fixstr (what engines send for keys, tags and
// short values) within MaxStringBytes and returns its bytes in place; ok
// false, nothing consumed, for anything else.
func (x *Decoder) fixstr() (b []byte, ok bool) {
	p := x.rest()
	if len(p) == 0 || p[0]&0xe0 != 0xa0 {
		return nil, false
	}
	n := int(p[0] & 0x1f)
	if n >= len(p) || n > x.lim.MaxStringBytes {
		return nil, false
	}
	x.advance(1 + n)
	return p[1 : 1+n : 1+n], true
}

// advance consumes n bytes the caller has seen in the payload.
func (x *Decoder) advance(n int) { x.pos += n }

// left returns how many payload bytes remain.
func (x *Decoder) left() int { return len(x.payload) - x.pos }

// lib runs one library call on the payload from x.pos and moves x.pos past
// what it read. The hot path reads the payload in place; the library reads
// what that does not (floats, other encodings, truncated values) and words
// its errors.
func lib[T any](x *Decoder, call func(*msgpack.Decoder) (T, error)) (T, error) {
	_, _ = x.r.Seek(int64(x.pos), io.SeekStart) // within the payload: cannot fail
	v, err := call(x.d)
	x.pos = len(x.payload) - x.r.Len()
	return v, err
}

// libErr is lib for a call that returns only an error.
func libErr(x *Decoder, call func(*msgpack.Decoder) error) error {
	_, _ = x.r.Seek(int64(x.pos), io.SeekStart)
	err := call(x.d)
	x.pos = len(x.payload) - x.r.Len()
	return err
}

// decodeNil consumes a nil, in place when it is one.
func (x *Decoder) decodeNil() error {
	if p := x.rest(); len(p) > 0 && p[0] == msgpcode.Nil {
		x.advance(1)
		return nil
	}
	return libErr(x, (*msgpack.Decoder).DecodeNil)
}

// decodeInt64 reads an int of any width as its 64-bit two's-complement bit
// pattern (what the library's DecodeInt64 returns), in place when it is a
// complete int.
func (x *Decoder) decodeInt64() (int64, error) {
	if v, n := intAt(x.rest()); n > 0 {
		x.advance(n)
		return int64(v), nil
	}
	return lib(x, (*msgpack.Decoder).DecodeInt64)
}

// rawBytes reads a str or bin value's bytes, in place: the slice points into
// the payload and must not be written to. Strings over MaxStringBytes are
// skipped and reported.
func (x *Decoder) rawBytes() ([]byte, error) {
	if b, ok := x.fixstr(); ok {
		return b, nil
	}
	n, err := x.bytesHeader()
	if err != nil {
		return nil, err
	}
	if n > x.lim.MaxStringBytes {
		x.advance(n) // bytesHeader checked that n bytes remain
		return nil, overLimit("string of %d bytes exceeds the %d-byte cap", n, x.lim.MaxStringBytes)
	}
	b := x.rest()[:n:n] // bytesHeader checked that n bytes remain
	x.advance(n)
	return b, nil
}

// bytesHeader consumes the header of a str, bin or ext value and returns how
// many payload bytes follow (for ext, including its type byte). The length is
// checked against what remains, so nothing is allocated for a lie.
func (x *Decoder) bytesHeader() (int, error) {
	c, err := x.peekCode()
	if err != nil {
		return 0, truncated("reading string", err)
	}
	var hdr, n int
	switch {
	case msgpcode.IsFixedString(c):
		hdr, n = 1, int(c&msgpcode.FixedStrMask)
	case c == msgpcode.Str8 || c == msgpcode.Bin8:
		hdr = 2
	case c == msgpcode.Str16 || c == msgpcode.Bin16:
		hdr = 3
	case c == msgpcode.Str32 || c == msgpcode.Bin32:
		hdr = 5
	case c == msgpcode.FixExt1, c == msgpcode.FixExt2, c == msgpcode.FixExt4,
		c == msgpcode.FixExt8, c == msgpcode.FixExt16:
		hdr, n = 1, 1+1<<(c-msgpcode.FixExt1)
	case c == msgpcode.Ext8:
		hdr = 2
	case c == msgpcode.Ext16:
		hdr = 3
	case c == msgpcode.Ext32:
		hdr = 5
	default:
		if err := x.skip(); err != nil {
			return 0, err
		}
		return 0, malformed("want str or bin, got %s", classify(c))
	}
	h := x.rest()
	if len(h) < hdr {
		return 0, truncated("reading string header", io.ErrUnexpectedEOF)
	}
	x.advance(hdr)
	switch hdr {
	case 2:
		n = int(h[1])
	case 3:
		n = int(h[1])<<8 | int(h[2])
	case 5:
		n = int(h[1])<<24 | int(h[2])<<16 | int(h[3])<<8 | int(h[4])
	}
	if classify(c) == classExt && hdr > 1 {
		n++ // the ext type byte
	}
	if n > x.left() {
		return 0, &structuralError{messages.ReasonTruncated,
			fmt.Sprintf("value declares %d bytes but %d remain", n, x.left())}
	}
	return n, nil
}

// optString reads a str-or-nil value. "" and nil both give "".
func (x *Decoder) optString(field string) (string, error) {
	cl, err := x.peek()
	if err != nil {
		return "", err
	}
	switch cl {
	case classNil:
		return "", x.decodeNil()
	case classStr:
		b, err := x.rawBytes()
		if err != nil {
			return "", err
		}
		return intern(b), nil
	}
	if err := x.skip(); err != nil {
		return "", err
	}
	return "", malformed("%s: want str or nil, got %s", field, cl)
}

// optInt reads an int-or-nil value; min is the smallest acceptable value.
func (x *Decoder) optInt(field string, min int64) (Opt[int64], error) {
	cl, err := x.peek()
	if err != nil {
		return Opt[int64]{}, err
	}
	switch cl {
	case classNil:
		return Opt[int64]{}, x.decodeNil()
	case classInt:
		v, err := x.decodeInt64()
		if err != nil {
			return Opt[int64]{}, truncated(field, err)
		}
		if v < min {
			return Opt[int64]{}, malformed("%s: %d is below %d", field, v, min)
		}
		return Some(v), nil
	}
	if err := x.skip(); err != nil {
		return Opt[int64]{}, err
	}
	return Opt[int64]{}, malformed("%s: want int or nil, got %s", field, cl)
}

// hash reads one block hash: an int of any width (bit pattern kept) or bin
// folded by x.fold.
func (x *Decoder) hash(field string) (uint64, error) {
	cl, err := x.peek()
	if err != nil {
		return 0, err
	}
	switch cl {
	case classInt:
		v, err := x.decodeInt64()
		if err != nil {
			return 0, truncated(field, err)
		}
		return uint64(v), nil
	case classBin:
		b, err := x.rawBytes()
		if err != nil {
			return 0, err
		}
		v, ok := x.fold(b)
		if !ok {
			return 0, malformed("%s: bin hash of %d bytes cannot be folded", field, len(b))
		}
		return v, nil
	}
	if err := x.skip(); err != nil {
		return 0, err
	}
	return 0, malformed("%s: want int or bin, got %s", field, cl)
}

// skip consumes one value of any shape, however deeply nested, without
// recursion and in constant memory: it only counts the values still to
// consume (a container adds its elements to the count), so a value kvrouter
// does not read costs its bytes and nothing else, and the position after it
// is always known.
func (x *Decoder) skip() error {
	for left := 1; left > 0; left-- {
		cl, err := x.peek()
		if err != nil {
			return err
		}
		var n int
		switch cl {
		case classArray:
			n, err = x.arrayLen()
		case classMap:
			n, err = x.mapLen()
			n *= 2
		case classStr, classBin, classExt:
			if n, err = x.bytesHeader(); err != nil {
				return err
			}
			x.advance(n) // bytesHeader checked that n bytes remain
			continue
		default: // nil, bool, numbers: at most 9 bytes
			if err := libErr(x, (*msgpack.Decoder).Skip); err != nil {
				return truncated("skipping value", err)
			}
			continue
		}
		if err != nil {
			return err
		}
		left += n // every element takes at least one byte: bounded by the payload
	}
	return nil
}

// skipN consumes n values.
func (x *Decoder) skipN(n int) error {
	for ; n > 0; n-- {
		if err := x.skip(); err != nil {
			return err
		}
	}
	return nil
}

// intern returns a shared string for the values engines repeat in every
// event (tags, keys, media, kinds), so decoding them does not allocate.
func intern(b []byte) string {
	if e := names.lookup(b); e != nil {
		return e.s
	}
	return string(b)
}

// names holds the known keys and the values intern shares.
var names = newNameTable(keyFields, []string{
	"GPU", "CPU", "CPU_PINNED", "DISK", "LOCAL", "REMOTE",
	"full_attention", "mla_attention", "sink_full_attention", "sliding_window", "mamba",
})
