package wire

// The strings engines repeat in every event — map keys ("block_hashes",
// "token_ids", …), tags ("BlockStored") and values ("GPU",
// "full_attention") — are looked up in names, a table built once with no
// two of them in the same slot: a string's slot is computed from its
// length and three of its bytes, and the string in that slot is the only
// candidate, so a lookup is one multiply and one comparison, with no
// hashing of the whole string and no probing (a Go map's lookup was ~5 %
// of the router's ingest CPU). A string whose slot holds another one is
// not a known string.

// name is one known string: its shared spelling and, for a map key, the
// field it names.
type name struct {
	s   string
	f   field // fIgnore for values and for keys kvrouter skips
	key bool  // a known map key (event or batch)
}

const nameSlots = 512 // a power of two; 9 bits of slot index

// nameTable holds every known string at its slot; mul is the multiplier
// that puts no two in one slot.
type nameTable struct {
	mul   uint32
	slots [nameSlots]name
}

// slot returns b's slot under multiplier mul.
func slot(b []byte, mul uint32) uint32 {
	n := len(b)
	if n == 0 {
		return 0
	}
	h := uint32(n) | uint32(b[0])<<8 | uint32(b[n-1])<<16 | uint32(b[n/2])<<24
	return (h * mul) >> (32 - 9)
}

// lookup returns b's entry, or nil when b is not a known string (the
// empty string is none).
func (t *nameTable) lookup(b []byte) *name {
	e := &t.slots[slot(b, t.mul)]
	if len(b) == 0 || e.s != string(b) {
		return nil
	}
	return e
}

// newNameTable builds the table of keys (with their fields) and values
// ("" left out). It tries odd multipliers until no two strings share a
// slot; the strings are fixed, so the search ends the same way every time,
// after a few tries (TestNameTable holds the lookups).
func newNameTable(keys map[string]field, values []string) *nameTable {
	all := map[string]name{}
	for _, v := range values {
		if v != "" {
			all[v] = name{s: v}
		}
	}
	for k, f := range keys {
		all[k] = name{s: k, f: f, key: true}
	}
	mul := uint32(0x9e3779b1)
	for range 1 << 16 {
		t := &nameTable{mul: mul}
		ok := true
		for _, e := range all {
			sl := &t.slots[slot([]byte(e.s), mul)]
			if sl.s != "" {
				ok = false
				break
			}
			*sl = e
		}
		if ok {
			return t
		}
		mul += 0x7f4a7c16 // an even step keeps it odd
	}
	panic("wire: no multiplier puts the known strings in distinct slots")
}
