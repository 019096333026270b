package routerevent

import (
	"math/bits"
	"strings"
)

// Every serde struct of the message (the router event, the event, the
// store and remove data, a block) arrives as a map — rmp_serde's
// to_vec_named: keys in any order, unknown keys ignored — or as an array —
// to_vec: fields in declaration order, extra elements ignored. The helpers
// here read both shapes for the structs whose fields need no sniffing; the
// router event and the store data, whose legacy arrays do, read their
// arrays by hand.
//
// A field is named by its bit: field i of a record is 1<<i. The callbacks
// are plain func parameters that never escape, so the closures passed to
// them live on the caller's stack: a reused Decoder stays allocation-free.

// record lists the fields of one struct that Decode reads.
type record struct {
	name     string   // for errors: "event array has …"
	keys     []string // the fields read, field i having bit 1<<i
	required uint8    // the fields that must be present; in an array, the leading ones
}

// Field bits of the router event.
const (
	fWorkerID = 1 << iota
	fTier
	fDomain
	fEvent
	fSession
)

var routerEventRecord = record{
	name:     "router event",
	keys:     []string{keyWorkerID, keyStorageTier, keyResidencyDomain, keyEvent, keySessionID},
	required: fWorkerID | fEvent,
}

// Field bits of the event.
const (
	fEventID = 1 << iota
	fData
	fDpRank
)

var eventRecord = record{
	name:     "event",
	keys:     []string{keyEventID, keyData, keyDpRank},
	required: fEventID | fData,
}

// Field bits of the store data. start_position, a replay hint kvrouter
// does not use, is skipped as an unknown key.
const (
	fParent = 1 << iota
	fBlocks
)

var storeDataRecord = record{
	name:     "store data",
	keys:     []string{keyParentHash, keyBlocks},
	required: fBlocks,
}

// Field bits of a block. mm_extra_info, already folded into tokens_hash,
// is skipped as an unknown key.
const (
	fBlockHash = 1 << iota
	fTokensHash
)

var blockRecord = record{
	name:     "block",
	keys:     []string{keyBlockHash, keyTokensHash},
	required: fBlockHash | fTokensHash,
}

// Field bits of the remove data.
const fBlockHashes = 1

var removeDataRecord = record{
	name:     "remove data",
	keys:     []string{keyBlockHashes},
	required: fBlockHashes,
}

// isArrayNext peeks at the next value, which must be a map or an array,
// and reports whether it is an array.
func (d *Decoder) isArrayNext() (bool, error) {
	c, err := d.peek()
	if err != nil {
		return false, err
	}
	switch {
	case isArray(c):
		return true, nil
	case isMap(c):
		return false, nil
	}
	return false, wrongType("map or array", c)
}

// record reads a struct of rec's fields, as a map or as an array, calling
// field with the bit of each field present.
func (d *Decoder) record(rec *record, field func(f uint8) error) error {
	array, err := d.isArrayNext()
	if err != nil {
		return err
	}
	if array {
		return d.tuple(rec, field)
	}
	return d.fields(rec, field)
}

// tuple reads rec's fields from an array that has at least the required
// ones; the elements past rec's fields are skipped.
func (d *Decoder) tuple(rec *record, field func(f uint8) error) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	if need := bits.Len8(rec.required); n < need {
		return tooShort(rec.name, n, rec.keys[:need]...)
	}
	known := min(n, len(rec.keys))
	for i := range known {
		if err := field(1 << i); err != nil {
			return err
		}
	}
	return d.skipN(n - known)
}

// fields reads rec's fields from a map: each at most once, the values of
// other keys skipped, the required ones checked last (in bit order).
func (d *Decoder) fields(rec *record, field func(f uint8) error) error {
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	var seen uint8
	for range n {
		k, ok, err := d.key()
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		i := rec.index(k)
		switch {
		case i < 0:
			err = d.skip()
		case seen&(1<<i) != 0:
			err = at(rec.keys[i], errorf(ErrMalformed, "repeated"))
		default:
			seen |= 1 << i
			err = field(1 << i)
		}
		if err != nil {
			return err
		}
	}
	for i, k := range rec.keys {
		if rec.required&^seen&(1<<i) != 0 {
			return at(k, errorf(ErrMalformed, "missing"))
		}
	}
	return nil
}

// index returns the position of key k in rec.keys, or -1.
func (rec *record) index(k []byte) int {
	for i, key := range rec.keys {
		if string(k) == key {
			return i
		}
	}
	return -1
}

// tooShort is the error of a what array of n elements, fewer than the
// fields it must have.
func tooShort(what string, n int, want ...string) error {
	if n == 0 && len(want) == 1 {
		return errorf(ErrMalformed, "%s array is empty, want (%s)", what, want[0])
	}
	return errorf(ErrMalformed, "%s array has %d elements, want at least %d (%s)", what, n, len(want), strings.Join(want, ", "))
}
