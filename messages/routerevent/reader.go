package routerevent

import (
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The reader works on the whole message in memory: every length is checked
// against the bytes that remain before it is used, nothing is copied except
// the session id, and skipped values are walked without recursion.

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

func (d *Decoder) rest() int { return len(d.b) - d.off }

// peek returns the code of the next value without consuming it.
func (d *Decoder) peek() (byte, error) {
	if d.off >= len(d.b) {
		return 0, errEnd
	}
	return d.b[d.off], nil
}

// take consumes n bytes.
func (d *Decoder) take(n int) ([]byte, error) {
	if n > d.rest() {
		return nil, errEnd
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

// size reads a big-endian length of w bytes (1, 2 or 4).
func (d *Decoder) size(w int) (int, error) {
	p, err := d.take(w)
	if err != nil {
		return 0, err
	}
	switch w {
	case 1:
		return int(p[0]), nil
	case 2:
		return int(binary.BigEndian.Uint16(p)), nil
	}
	return int(binary.BigEndian.Uint32(p)), nil
}

// literal consumes lit if the input continues with it.
func (d *Decoder) literal(lit string) bool {
	if len(lit) <= d.rest() && string(d.b[d.off:d.off+len(lit)]) == lit {
		d.off += len(lit)
		return true
	}
	return false
}

// nilNext consumes a nil and reports whether there was one.
func (d *Decoder) nilNext() bool {
	if d.off < len(d.b) && d.b[d.off] == msgpcode.Nil {
		d.off++
		return true
	}
	return false
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

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Uint64) ||
		(c >= msgpcode.Int8 && c <= msgpcode.Int64)
}

// arrayLen reads an array header whose elements (one byte each at least)
// fit in what remains.
func (d *Decoder) arrayLen() (int, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	var n int
	switch {
	case msgpcode.IsFixedArray(c):
		d.off++
		n = int(c & msgpcode.FixedArrayMask)
	case c == msgpcode.Array16:
		d.off++
		n, err = d.size(2)
	case c == msgpcode.Array32:
		d.off++
		n, err = d.size(4)
	default:
		return 0, wrongType("array", c)
	}
	if err != nil {
		return 0, err
	}
	if n > d.rest() {
		return 0, errorf(ErrTruncated, "array declares %d elements but %d bytes remain", n, d.rest())
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
	var n int
	switch {
	case msgpcode.IsFixedMap(c):
		d.off++
		n = int(c & msgpcode.FixedMapMask)
	case c == msgpcode.Map16:
		d.off++
		n, err = d.size(2)
	case c == msgpcode.Map32:
		d.off++
		n, err = d.size(4)
	default:
		return 0, wrongType("map", c)
	}
	if err != nil {
		return 0, err
	}
	if n > d.rest()/2 {
		return 0, errorf(ErrTruncated, "map declares %d entries but %d bytes remain", n, d.rest())
	}
	return n, nil
}

// str reads a str value and returns its bytes (a sub-slice of the input).
func (d *Decoder) str() ([]byte, error) {
	c, err := d.peek()
	if err != nil {
		return nil, err
	}
	var n int
	switch {
	case msgpcode.IsFixedString(c):
		d.off++
		n = int(c & msgpcode.FixedStrMask)
	case c == msgpcode.Str8:
		d.off++
		n, err = d.size(1)
	case c == msgpcode.Str16:
		d.off++
		n, err = d.size(2)
	case c == msgpcode.Str32:
		d.off++
		n, err = d.size(4)
	default:
		return nil, wrongType("str", c)
	}
	if err != nil {
		return nil, err
	}
	if n > d.rest() {
		return nil, errorf(ErrTruncated, "str declares %d bytes but %d remain", n, d.rest())
	}
	return d.take(n)
}

// int reads an integer of any msgpack width. For unsigned encodings neg is
// false and v is the value; for signed ones v is the two's-complement bit
// pattern and neg says whether the value is negative.
func (d *Decoder) int() (v uint64, neg bool, err error) {
	c, err := d.peek()
	if err != nil {
		return 0, false, err
	}
	if msgpcode.IsFixedNum(c) {
		d.off++
		return uint64(int64(int8(c))), c >= 0xe0, nil
	}
	var w int
	switch c {
	case msgpcode.Uint8, msgpcode.Int8:
		w = 1
	case msgpcode.Uint16, msgpcode.Int16:
		w = 2
	case msgpcode.Uint32, msgpcode.Int32:
		w = 4
	case msgpcode.Uint64, msgpcode.Int64:
		w = 8
	default:
		return 0, false, wrongType("int", c)
	}
	if w+1 > d.rest() {
		return 0, false, errEnd
	}
	p := d.b[d.off+1 : d.off+1+w]
	d.off += 1 + w
	signed := c >= msgpcode.Int8
	switch w {
	case 1:
		if signed {
			v = uint64(int64(int8(p[0])))
		} else {
			v = uint64(p[0])
		}
	case 2:
		v = uint64(binary.BigEndian.Uint16(p))
		if signed {
			v = uint64(int64(int16(v)))
		}
	case 4:
		v = uint64(binary.BigEndian.Uint32(p))
		if signed {
			v = uint64(int64(int32(v)))
		}
	case 8:
		v = binary.BigEndian.Uint64(p)
	}
	return v, signed && int64(v) < 0, nil
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
		var n, w int // container entries; or payload bytes after a w-byte length
		switch {
		case msgpcode.IsFixedNum(c), c == msgpcode.Nil, c == msgpcode.False, c == msgpcode.True:
			d.off++
			continue
		case msgpcode.IsFixedString(c):
			d.off++
			_, err = d.take(int(c & msgpcode.FixedStrMask))
		case isArray(c):
			n, err = d.arrayLen()
		case isMap(c):
			n, err = d.mapLen()
			n *= 2
		case c == msgpcode.Uint8, c == msgpcode.Int8:
			_, err = d.take(2)
		case c == msgpcode.Uint16, c == msgpcode.Int16:
			_, err = d.take(3)
		case c == msgpcode.Uint32, c == msgpcode.Int32, c == msgpcode.Float:
			_, err = d.take(5)
		case c == msgpcode.Uint64, c == msgpcode.Int64, c == msgpcode.Double:
			_, err = d.take(9)
		case c == msgpcode.Str8, c == msgpcode.Bin8:
			w = 1
		case c == msgpcode.Str16, c == msgpcode.Bin16:
			w = 2
		case c == msgpcode.Str32, c == msgpcode.Bin32:
			w = 4
		case c >= msgpcode.FixExt1 && c <= msgpcode.FixExt16: // type byte + 1..16 bytes
			_, err = d.take(2 + 1<<(c-msgpcode.FixExt1))
		case c == msgpcode.Ext8, c == msgpcode.Ext16, c == msgpcode.Ext32:
			d.off++
			n, err = d.size(1 << (c - msgpcode.Ext8)) // 1, 2, 4
			if err == nil {
				_, err = d.take(n + 1) // + the type byte
			}
			n = 0
		default:
			return wrongType("a msgpack value", c)
		}
		if w > 0 {
			d.off++
			if n, err = d.size(w); err == nil {
				_, err = d.take(n)
			}
			n = 0
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
