package routerevent

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// data reads KvCacheEventData, externally tagged: "cleared" (a unit
// variant), or a one-entry map {"stored": …} / {"removed": …}; the variant
// may also be given by its index.
func (d *Decoder) data(ev *messages.KvCacheEvent) error {
	if err := d.dataBody(ev); err != nil {
		return at(keyData, err)
	}
	return nil
}

func (d *Decoder) dataBody(ev *messages.KvCacheEvent) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if !isMap(c) {
		idx, err := d.variant()
		if err != nil {
			return err
		}
		if idx != idxCleared {
			return errorf(ErrMalformed, "variant %s needs a payload", variantName(idx))
		}
		ev.Kind = messages.KindCleared
		return nil
	}
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	if n != 1 {
		return errorf(ErrMalformed, "enum map has %d entries, want 1", n)
	}
	idx, err := d.variant()
	if err != nil {
		return err
	}
	switch idx {
	case idxStored:
		err = d.storeData(ev)
	case idxRemoved:
		err = d.removeData(ev)
	default: // a cleared variant written with a payload: accept and ignore it
		ev.Kind = messages.KindCleared
		return d.skip()
	}
	if err != nil {
		return at(variantName(idx), err)
	}
	return nil
}

func variantName(idx int) string {
	return [...]string{variantStored, variantRemoved, variantCleared}[idx]
}

// variant reads a variant name or index.
func (d *Decoder) variant() (int, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case isStr(c):
		s, err := d.str()
		if err != nil {
			return 0, err
		}
		switch string(s) {
		case variantStored:
			return idxStored, nil
		case variantRemoved:
			return idxRemoved, nil
		case variantCleared:
			return idxCleared, nil
		}
		return 0, errorf(ErrUnsupported, "unknown variant %q", clip(s))
	case isInt(c):
		v, err := d.uint(math.MaxUint32)
		if err != nil {
			return 0, err
		}
		if v > idxCleared {
			return 0, errorf(ErrUnsupported, "unknown variant index %d", v)
		}
		return int(v), nil
	}
	return 0, wrongType("variant name or index", c)
}

func (d *Decoder) storeData(ev *messages.KvCacheEvent) error {
	ev.Kind = messages.KindStored
	array, err := d.isArrayNext()
	if err != nil {
		return err
	}
	if array {
		return d.storeDataArray(ev)
	}
	return d.fields(&storeDataRecord, func(f uint8) error {
		if f == fParent {
			return d.parent(ev)
		}
		return d.blockList(ev)
	})
}

// storeDataArray reads [parent_hash, start_position?, blocks, …]: blocks
// is the first array after the parent (start_position is an int or nil).
func (d *Decoder) storeDataArray(ev *messages.KvCacheEvent) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	if n < 2 {
		return tooShort(storeDataRecord.name, n, keyParentHash, keyBlocks)
	}
	if err := d.parent(ev); err != nil {
		return err
	}
	used := 2
	c, err := d.peek()
	if err != nil {
		return err
	}
	if !isArray(c) {
		if n < 3 {
			return tooShort(storeDataRecord.name, n, keyParentHash, keyStartPosition, keyBlocks)
		}
		if err := d.skip(); err != nil { // start_position
			return err
		}
		used = 3
	}
	if err := d.blockList(ev); err != nil {
		return err
	}
	return d.skipN(n - used)
}

func (d *Decoder) parent(ev *messages.KvCacheEvent) error {
	if d.nilNext() {
		ev.HasParent, ev.ParentHash = false, 0
		return nil
	}
	h, err := d.hash()
	if err != nil {
		return at(keyParentHash, err)
	}
	ev.HasParent, ev.ParentHash = true, messages.ExternalHash(h)
	return nil
}

func (d *Decoder) blockList(ev *messages.KvCacheEvent) error {
	n, err := d.arrayLen()
	if err != nil {
		return at(keyBlocks, err)
	}
	if n > d.lim.MaxBlocks {
		return at(keyBlocks, errorf(ErrLimit, "%d blocks exceed the %d-block cap", n, d.lim.MaxBlocks))
	}
	d.blocks = slices.Grow(d.blocks[:0], n)
	for i := range n {
		if b, ok := d.canonicalBlock(); ok {
			d.blocks = append(d.blocks, b)
			continue
		}
		var b messages.StoredBlock
		if err := d.block(&b); err != nil {
			return at(fmt.Sprintf("%s[%d]", keyBlocks, i), err)
		}
		d.blocks = append(d.blocks, b)
	}
	ev.Blocks = nil
	if n > 0 {
		ev.Blocks = d.blocks[:n:n]
	}
	return nil
}

// The block as Encode (and rmp_serde::to_vec_named) writes it, around the
// two hashes.
const (
	canonBlockHead = "\x83\xaa" + keyBlockHash
	canonTokensKey = "\xab" + keyTokensHash
	canonBlockTail = "\xad" + keyMmExtraInfo + "\xc0"
)

// canonicalBlock reads a block in Encode's exact layout; on any difference
// it consumes nothing and the general path takes over.
func (d *Decoder) canonicalBlock() (messages.StoredBlock, bool) {
	start := d.pos()
	if d.literal(canonBlockHead) {
		if bh, err := d.hash(); err == nil && d.literal(canonTokensKey) {
			if th, err := d.hash(); err == nil && d.literal(canonBlockTail) {
				return messages.StoredBlock{BlockHash: messages.ExternalHash(bh), TokensHash: messages.LocalHash(th)}, true
			}
		}
	}
	d.seek(start)
	return messages.StoredBlock{}, false
}

func (d *Decoder) block(b *messages.StoredBlock) error {
	return d.record(&blockRecord, func(f uint8) error {
		if f == fBlockHash {
			return d.blockHash(b)
		}
		return d.tokensHash(b)
	})
}

func (d *Decoder) blockHash(b *messages.StoredBlock) error {
	h, err := d.hash()
	if err != nil {
		return at(keyBlockHash, err)
	}
	b.BlockHash = messages.ExternalHash(h)
	return nil
}

func (d *Decoder) tokensHash(b *messages.StoredBlock) error {
	h, err := d.hash()
	if err != nil {
		return at(keyTokensHash, err)
	}
	b.TokensHash = messages.LocalHash(h)
	return nil
}

func (d *Decoder) removeData(ev *messages.KvCacheEvent) error {
	ev.Kind = messages.KindRemoved
	return d.record(&removeDataRecord, func(uint8) error { return d.hashList(ev) })
}

func (d *Decoder) hashList(ev *messages.KvCacheEvent) error {
	n, err := d.arrayLen()
	if err != nil {
		return at(keyBlockHashes, err)
	}
	if n > d.lim.MaxBlocks {
		return at(keyBlockHashes, errorf(ErrLimit, "%d hashes exceed the %d-hash cap", n, d.lim.MaxBlocks))
	}
	d.removed = slices.Grow(d.removed[:0], n)
	for i := range n {
		h, err := d.hash()
		if err != nil {
			return at(fmt.Sprintf("%s[%d]", keyBlockHashes, i), err)
		}
		d.removed = append(d.removed, messages.ExternalHash(h))
	}
	ev.Removed = nil
	if n > 0 {
		ev.Removed = d.removed[:n:n]
	}
	return nil
}
