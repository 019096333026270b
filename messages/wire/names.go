package wire

import (
	"encoding/binary"
	"math/bits"
)

// The strings engines repeat in every event — map keys ("block_hashes",
// "token_ids", …), tags ("BlockStored") and values ("GPU",
// "full_attention") — are looked up in names, a table built once with no
// two of them in the same slot. A string is read as two words that
// together cover its bytes (words); its slot comes from them and its
// length, and the string in that slot is the only candidate, compared by
// those words (and, past 16 bytes, its middle): no hashing of the bytes
// one by one, no probing, and up to 16 bytes no call to compare memory (a
// Go map's lookup was ~5 % of the router's ingest CPU). A string whose slot holds another
// one is not a known string.

// name is one known string: its shared spelling and words and, for a map
// key, the field it names; for an event tag, its type.
type name struct {
	s      string
	lo, hi uint64 // words(s)
	f      field  // fIgnore for values and for keys kvrouter skips
	key    bool   // a known map key (event or batch)
	typ    Type   // TypeUnknown but for the three tags
}

const nameBits = 9 // 512 slots

// nameTable holds every known string at its slot; mul is the multiplier
// that puts no two in one slot.
type nameTable struct {
	mul   uint64
	slots [1 << nameBits]name
}

// words returns two words that together hold every byte of b: its first
// and last 8 bytes (overlapping below 16 bytes), its first and last 4 below
// 8, its bytes in lo below 4. Two strings of one length up to 16 bytes
// are equal exactly when their words are.
func words(b []byte) (lo, hi uint64) {
	switch n := len(b); {
	case n >= 8:
		return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	}
	for i, c := range b {
		lo |= uint64(c) << (8 * i)
	}
	return lo, 0
}

// slot returns the slot of a string of n bytes with words lo, hi.
func (t *nameTable) slot(lo, hi uint64, n int) uint64 {
	return ((lo ^ bits.RotateLeft64(hi, 29) ^ uint64(n)) * t.mul) >> (64 - nameBits)
}

// lookup returns b's entry, or nil when b is not a known string (the
// empty string is none).
func (t *nameTable) lookup(b []byte) *name {
	lo, hi := words(b)
	e := &t.slots[t.slot(lo, hi, len(b))]
	n := len(b)
	if e.lo != lo || e.hi != hi || len(e.s) != n || n == 0 {
		return nil
	}
	if n > 16 && e.s[8:n-8] != string(b[8:n-8]) {
		return nil
	}
	return e
}

// newNameTable builds the table of keys (with their fields), the three
// tags (with their types) and values ("" left out). It tries odd
// multipliers until no two strings share a slot; the strings are fixed, so
// the search ends the same way every time, after a few tries
// (TestNameTable holds the lookups).
func newNameTable(keys map[string]field, values []string) *nameTable {
	all := map[string]name{}
	for _, v := range values {
		if v != "" {
			all[v] = name{s: v}
		}
	}
	for typ, tag := range map[Type]string{TypeStored: TagStored, TypeRemoved: TagRemoved, TypeCleared: TagCleared} {
		all[tag] = name{s: tag, typ: typ}
	}
	for k, f := range keys {
		all[k] = name{s: k, f: f, key: true}
	}
	mul := uint64(0x9e3779b97f4a7c15)
	for range 1 << 16 {
		t := &nameTable{mul: mul}
		ok := true
		for _, e := range all {
			e.lo, e.hi = words([]byte(e.s))
			sl := &t.slots[t.slot(e.lo, e.hi, len(e.s))]
			if sl.s != "" {
				ok = false
				break
			}
			*sl = e
		}
		if ok {
			return t
		}
		mul += 0x7f4a7c15f39cc060 // an even step keeps it odd
	}
	panic("wire: no multiplier puts the known strings in distinct slots")
}
