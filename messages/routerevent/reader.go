package routerevent

import (
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The reader drives vmihailenco/msgpack's streaming Decoder (d.md) over a
// bytes.Reader on the message (d.r), which it reads without buffering of its
// own. Every value's code is peeked and checked before the library is asked
// to read it, so the library's leniencies (nil as 0 or as an empty
// container, a map inside an ext) never apply; every length the library
// returns is checked against the bytes that remain before it is used, and
// skipped values are walked without recursion, never through the library's
// Skip for containers, strings or extensions (it recurses, and reads a
// skipped string into a buffer of its declared size). Nothing is copied but
// the session id: a str's bytes are a sub-slice of the message.

type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// at prefixes err with the field it was found in.
func at(field string, err error) error { return &fieldError{field, err} }

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, kind)...)
}

// errEnd is shared: the message has nothing to say beyond the field path
// its callers add, and a constant keeps the reader's hot helpers inlinable.
var errEnd = errorf(ErrTruncated, "input ends inside a value")

// typeName names the msgpack type of the value starting with code c.
func typeName(c byte) string {
	switch {
	case msgpcode.IsFixedNum(c):
		return "int"
	case msgpcode.IsFixedMap(c):
		return "map"
	case msgpcode.IsFixedArray(c):
		return "array"
	case msgpcode.IsFixedString(c):
		return "str"
	}
	switch c {
	case msgpcode.Nil:
		return "nil"
	case msgpcode.False, msgpcode.True:
		return "bool"
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return "int"
	case msgpcode.Float, msgpcode.Double:
		return "float"
	case msgpcode.Str8, msgpcode.Str16, msgpcode.Str32:
		return "str"
	case msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32:
		return "bin"
	case msgpcode.Array16, msgpcode.Array32:
		return "array"
	case msgpcode.Map16, msgpcode.Map32:
		return "map"
	case msgpcode.FixExt1, msgpcode.FixExt2, msgpcode.FixExt4, msgpcode.FixExt8, msgpcode.FixExt16,
		msgpcode.Ext8, msgpcode.Ext16, msgpcode.Ext32:
		return "ext"
	}
	return fmt.Sprintf("invalid code 0x%02x", c)
}

func wrongType(want string, c byte) error {
	return errorf(ErrMalformed, "want %s, got %s", want, typeName(c))
}

// readErr classifies an error of the library's reads. The code was checked
// beforehand, so only the input's end remains.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errEnd
	}
	return errorf(ErrMalformed, "%v", err)
}

// rest is how many bytes remain; pos is the offset of the next one.
func (d *Decoder) rest() int { return d.r.Len() }
func (d *Decoder) pos() int  { return len(d.in) - d.r.Len() }

// seek moves the reader to offset off of the message (within it: cannot
// fail).
func (d *Decoder) seek(off int) { _, _ = d.r.Seek(int64(off), io.SeekStart) }

// peek returns the code of the next value without consuming it.
func (d *Decoder) peek() (byte, error) {
	c, err := d.md.PeekCode()
	if err != nil {
		return 0, errEnd
	}
	return c, nil
}

// literal consumes lit if the input continues with it.
func (d *Decoder) literal(lit string) bool {
	p := d.pos()
	if len(lit) <= d.rest() && string(d.in[p:p+len(lit)]) == lit {
		d.seek(p + len(lit))
		return true
	}
	return false
}

// nilNext consumes a nil and reports whether there was one.
func (d *Decoder) nilNext() bool {
	if c, err := d.peek(); err != nil || c != msgpcode.Nil {
		return false
	}
	return d.md.DecodeNil() == nil
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isStr(c byte) bool {
	return msgpcode.IsFixedString(c) || c == msgpcode.Str8 || c == msgpcode.Str16 || c == msgpcode.Str32
}

func isBin(c byte) bool { return c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32 }

func isExt(c byte) bool {
	return (c >= msgpcode.FixExt1 && c <= msgpcode.FixExt16) || (c >= msgpcode.Ext8 && c <= msgpcode.Ext32)
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Uint64) ||
		(c >= msgpcode.Int8 && c <= msgpcode.Int64)
}

// isScalar reports the values of at most nine bytes that the library's Skip
// consumes without recursion or allocation: nil, bools and numbers.
func isScalar(c byte) bool {
	return isInt(c) || c == msgpcode.Nil || c == msgpcode.False || c == msgpcode.True ||
		c == msgpcode.Float || c == msgpcode.Double
}

// arrayLen reads an array header whose elements (one byte each at least)
// fit in what remains.
func (d *Decoder) arrayLen() (int, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	if !isArray(c) {
		return 0, wrongType("array", c)
	}
	n, err := d.md.DecodeArrayLen()
	if err != nil {
		return 0, readErr(err)
	}
	if uint(n) > uint(d.rest()) { // uint: a 32-bit int may have wrapped
		return 0, errorf(ErrTruncated, "array declares %d elements but %d bytes remain", uint32(n), d.rest())
	}
	return n, nil
}

// mapLen reads a map header whose entries (two bytes each at least) fit in
// what remains.
func (d *Decoder) mapLen() (int, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	if !isMap(c) {
		return 0, wrongType("map", c)
	}
	n, err := d.md.DecodeMapLen()
	if err != nil {
		return 0, readErr(err)
	}
	if uint(n) > uint(d.rest()/2) {
		return 0, errorf(ErrTruncated, "map declares %d entries but %d bytes remain", uint32(n), d.rest())
	}
	return n, nil
}

// payloadLen consumes the header of the str, bin or ext value with code c
// and returns how many bytes follow it (for ext, after its type byte),
// checked against what remains.
func (d *Decoder) payloadLen(c byte) (n int, err error) {
	if isExt(c) {
		_, n, err = d.md.DecodeExtHeader()
	} else {
		n, err = d.md.DecodeBytesLen()
	}
	if err != nil {
		return 0, readErr(err)
	}
	if uint(n) > uint(d.rest()) {
		return 0, errorf(ErrTruncated, "%s declares %d bytes but %d remain", typeName(c), uint32(n), d.rest())
	}
	return n, nil
}

// str reads a str value and returns its bytes (a sub-slice of the input).
func (d *Decoder) str() ([]byte, error) {
	c, err := d.peek()
	if err != nil {
		return nil, err
	}
	if !isStr(c) {
		return nil, wrongType("str", c)
	}
	n, err := d.payloadLen(c)
	if err != nil {
		return nil, err
	}
	p := d.pos()
	d.seek(p + n)
	return d.in[p : p+n : p+n], nil
}

// int reads an integer of any msgpack width. For unsigned encodings neg is
// false and v is the value; for signed ones v is the two's-complement bit
// pattern and neg says whether the value is negative.
func (d *Decoder) int() (v uint64, neg bool, err error) {
	c, err := d.peek()
	if err != nil {
		return 0, false, err
	}
	if !isInt(c) {
		return 0, false, wrongType("int", c)
	}
	i, err := d.md.DecodeInt64() // the 64-bit pattern, for a uint64 too
	if err != nil {
		return 0, false, readErr(err)
	}
	signed := c >= msgpcode.NegFixedNumLow || (c >= msgpcode.Int8 && c <= msgpcode.Int64)
	return uint64(i), signed && i < 0, nil
}

// uint reads a non-negative integer no larger than max.
func (d *Decoder) uint(max uint64) (uint64, error) {
	v, neg, err := d.int()
	if err != nil {
		return 0, err
	}
	if neg {
		return 0, errorf(ErrMalformed, "%d is negative", int64(v))
	}
	if v > max {
		return 0, errorf(ErrMalformed, "%d exceeds %d", v, max)
	}
	return v, nil
}

// hash reads a block hash: an integer of any width, its 64-bit pattern kept
// (engines send unsigned and signed hashes).
func (d *Decoder) hash() (uint64, error) {
	v, _, err := d.int()
	return v, err
}

// key reads a map key. A key that is not a str is skipped with its value
// (ok false): serde never writes one, and it names no field kvrouter reads.
func (d *Decoder) key() (k []byte, ok bool, err error) {
	c, err := d.peek()
	if err != nil {
		return nil, false, err
	}
	if !isStr(c) {
		if err := d.skip(); err != nil {
			return nil, false, err
		}
		return nil, false, d.skip()
	}
	k, err = d.str()
	return k, err == nil, err
}

// skip consumes one value of any shape without recursion; containers nested
// deeper than MaxDepth are an error.
func (d *Decoder) skip() error {
	depth := 0
	d.pending[0] = 1
	for {
		for depth >= 0 && d.pending[depth] == 0 {
			depth--
		}
		if depth < 0 {
			return nil
		}
		d.pending[depth]--
		c, err := d.peek()
		if err != nil {
			return err
		}
		var n int // container entries
		switch {
		case isScalar(c):
			if err = d.md.Skip(); err != nil {
				err = readErr(err)
			}
		case isStr(c), isBin(c), isExt(c):
			if n, err = d.payloadLen(c); err == nil {
				d.seek(d.pos() + n)
			}
			n = 0
		case isArray(c):
			n, err = d.arrayLen()
		case isMap(c):
			n, err = d.mapLen()
			n *= 2
		default:
			return wrongType("a msgpack value", c)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		if depth+1 > d.lim.MaxDepth {
			return errorf(ErrLimit, "value nested deeper than %d levels", d.lim.MaxDepth)
		}
		depth++
		d.pending[depth] = n
	}
}

// skipN consumes n values.
func (d *Decoder) skipN(n int) error {
	for ; n > 0; n-- {
		if err := d.skip(); err != nil {
			return err
		}
	}
	return nil
}
