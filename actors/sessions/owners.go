package sessions

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/messages"
)

// owners is a stream's engine hash → holders table: one 6-byte slot per
// (lineage, block) the stream holds, naming the lineage and the block's
// position in it, with a tag of the hash's mix. The hash itself is not in
// the slot: the lineage's block list has it, and a lookup checks it there
// for slots whose tag matches (1 in 128 of the others). So the table is
// also every lineage's hash → position index, holds no pointer (the
// garbage collector does not scan it) and a hash held by several lineages
// of the stream is simply several slots.
//
// Open addressing with linear probing, at most 7/8 full counting
// tombstones (a probe compares 6-byte words in one run of memory; the
// tag spares the lineage's list for nearly every slot passed): a slot
// cannot be moved back on a delete without its hash, so a delete leaves a
// tombstone, and a rebuild (from the lineages' block lists, which hold
// the hashes) drops them. A rebuild leaves the table 7/12 full: it grows
// by half, not double (any size: the home slot is the mix scaled to it),
// so it is 7/12 to 7/8 full, ~6/0.72 = 8.3 bytes a block.
// Engine hashes are untrusted, so slots are chosen by a keyed mix.
type owners struct {
	slots []byte // size slots of slotBytes, and 2 bytes so any slot loads as 8
	size  int
	n     int // live slots
	tomb  int // tombstones
	seed  uint64
}

// Slot layout (48 bits, little-endian): tag (8 bits, high bit set: never
// 0) | lineage id (20) | absolute position (20).
const (
	slotBytes = 6
	posBits   = 20
	linBits   = 20
	tagShift  = posBits + linBits
	posMask   = 1<<posBits - 1
	linMask   = 1<<linBits - 1
	tomb      = uint64(1) // tag 0: never a live slot
	minSlots  = 16
	// maxSpan bounds a lineage's block list (live and dead blocks), so
	// that a position relative to its base fits posBits.
	maxSpan = 1 << (posBits - 1)
	// maxLineageIDs bounds the lineages of one stream (ids fit linBits).
	maxLineageIDs = 1 << linBits
)

// slot returns slot i.
func (o *owners) slot(i int) uint64 {
	return binary.LittleEndian.Uint64(o.slots[i*slotBytes:]) & (1<<48 - 1)
}

// set stores v in slot i.
func (o *owners) set(i int, v uint64) {
	b := o.slots[i*slotBytes : i*slotBytes+slotBytes]
	binary.LittleEndian.PutUint32(b, uint32(v))
	binary.LittleEndian.PutUint16(b[4:], uint16(v>>32))
}

// mix returns h's keyed mix: the home slot from its high bits (scaled to
// the table), the tag from its low 8.
func (o *owners) mix(h messages.ExternalHash) uint64 {
	hi, lo := bits.Mul64(uint64(h)^o.seed, 0x9e3779b97f4a7c15)
	return hi ^ lo
}

func tagOf(m uint64) uint64 { return (m&0xff | 0x80) << tagShift }

// home returns the first slot for mix m.
func (o *owners) home(m uint64) int {
	hi, _ := bits.Mul64(m, uint64(o.size))
	return int(hi)
}

// next returns the slot after i.
func (o *owners) next(i int) int {
	if i++; i == o.size {
		return 0
	}
	return i
}

func slotOf(m uint64, id uint32, abs uint32) uint64 {
	return tagOf(m) | uint64(id&linMask)<<posBits | uint64(abs&posMask)
}

func slotLin(s uint64) uint32 { return uint32(s>>posBits) & linMask }
func slotPos(s uint64) uint32 { return uint32(s) & posMask }

// absPos is position idx of l as a slot holds it.
func absPos(l *lineage, idx int32) uint32 { return (l.base + uint32(idx)) & posMask }

// relPos is the position in l of a slot's absolute position.
func relPos(l *lineage, abs uint32) int32 { return int32((abs - l.base) & posMask) }

// each calls f with the lineage and position of every holder of h in st,
// until f returns false.
func (st *stream) each(h messages.ExternalHash, f func(l *lineage, idx int32) bool) {
	o := &st.owners
	if o.n == 0 {
		return
	}
	m := o.mix(h)
	tag := tagOf(m)
	for i := o.home(m); ; i = o.next(i) {
		s := o.slot(i)
		if s == 0 {
			return
		}
		if s&^(1<<tagShift-1) != tag {
			continue
		}
		l := st.lins[slotLin(s)]
		if idx := relPos(l, slotPos(s)); l.hashes[idx] == h && !f(l, idx) {
			return
		}
	}
}

// find returns the position of h in the lineage with id (ok false: not
// held there).
func (st *stream) find(h messages.ExternalHash, id uint32) (int32, bool) {
	o := &st.owners
	if o.n == 0 {
		return -1, false
	}
	m := o.mix(h)
	tag := tagOf(m)
	for i := o.home(m); ; i = o.next(i) {
		s := o.slot(i)
		if s == 0 {
			return -1, false
		}
		if s&^(1<<tagShift-1) != tag || slotLin(s) != id {
			continue
		}
		l := st.lins[id]
		if idx := relPos(l, slotPos(s)); l.hashes[idx] == h {
			return idx, true
		}
	}
}

// reserve makes room for one more slot: a rebuild (from the lineages)
// when live slots and tombstones would pass 7/8. Call it before the block
// is in its lineage's list.
func (st *stream) reserve() {
	o := &st.owners
	if 8*(o.n+o.tomb+1) <= 7*o.size {
		return
	}
	size := max(minSlots, (12*(o.n+1)+6)/7) // 7/12 full after the rebuild
	if o.seed == 0 {
		o.seed = rand.Uint64() | 1
	}
	o.slots, o.size, o.n, o.tomb = make([]byte, size*slotBytes+2), size, 0, 0
	for _, l := range st.lins {
		if l == nil {
			continue
		}
		for i, h := range l.hashes {
			if l.tier(int32(i)) != 0 {
				st.own(h, l, int32(i))
			}
		}
	}
}

// own records that l holds h at idx (reserve first).
func (st *stream) own(h messages.ExternalHash, l *lineage, idx int32) {
	o := &st.owners
	m := o.mix(h)
	i := o.home(m)
	for o.slot(i) > tomb {
		i = o.next(i)
	}
	if o.slot(i) == tomb {
		o.tomb--
	}
	o.set(i, slotOf(m, l.id, absPos(l, idx)))
	o.n++
}

// slotAt returns the index of the slot recording that l holds h at
// absolute position abs (-1: none).
func (st *stream) slotAt(h messages.ExternalHash, id, abs uint32) int {
	o := &st.owners
	if o.n == 0 {
		return -1
	}
	m := o.mix(h)
	want := slotOf(m, id, abs)
	for i := o.home(m); ; i = o.next(i) {
		switch o.slot(i) {
		case want:
			return i
		case 0:
			return -1
		}
	}
}

// unown forgets that l holds h at idx.
func (st *stream) unown(h messages.ExternalHash, l *lineage, idx int32) {
	if i := st.slotAt(h, l.id, absPos(l, idx)); i >= 0 {
		st.owners.set(i, tomb)
		st.owners.n--
		st.owners.tomb++
	}
}

// reown records that l's block h moved from absolute position from to
// position idx (compaction, with l.base already moved).
func (st *stream) reown(h messages.ExternalHash, l *lineage, from uint32, idx int32) {
	if i := st.slotAt(h, l.id, from); i >= 0 {
		st.owners.set(i, slotOf(st.owners.mix(h), l.id, absPos(l, idx)))
	}
}
