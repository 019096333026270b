package radix

import (
	"math/bits"
	"slices"
)

// A block's set of streams. Each stream is an interned id; an entry is
// id<<4 | tier bits (bit t set: held on messages.StorageTier t). A block held
// by one stream keeps its entry inline in the node; by a few, a sorted entry
// list in Tree.sets; by many, per-tier bitsets indexed by id.

type wset struct {
	list []uint32  // sorted entries, while small
	bits *tierBits // when large (list == nil)
}

type tierBits struct {
	any  []uint64    // held on some tier
	tier [4][]uint64 // held on tier t; nil while no stream holds the block there
}

const tierMask = 1<<4 - 1

func words(maxID uint32) int { return int(maxID>>6) + 1 }

// bitsOf returns the tiers on which stream id holds block x (0: not held).
func (t *Tree) bitsOf(x, id uint32) uint8 {
	nd := t.node(x)
	switch nd.n {
	case 0:
		return 0
	case 1:
		if nd.ent>>4 == id {
			return uint8(nd.ent & tierMask)
		}
		return 0
	}
	ws := &t.sets[nd.ent]
	if tb := ws.bits; tb != nil {
		w, m := id>>6, uint64(1)<<(id&63)
		if int(w) >= len(tb.any) || tb.any[w]&m == 0 {
			return 0
		}
		var b uint8
		for tt := range tb.tier {
			if int(w) < len(tb.tier[tt]) && tb.tier[tt][w]&m != 0 {
				b |= 1 << tt
			}
		}
		return b
	}
	if i, ok := searchID(ws.list, id); ok {
		return uint8(ws.list[i] & tierMask)
	}
	return 0
}

func searchID(list []uint32, id uint32) (int, bool) {
	i, _ := slices.BinarySearch(list, id<<4)
	return i, i < len(list) && list[i]>>4 == id
}

// put sets stream id's tier bits on block x to b (b != 0), adding the
// entry if absent; it reports whether the entry is new.
func (t *Tree) put(x, id uint32, b uint8) bool {
	nd := t.node(x)
	e := id<<4 | uint32(b)
	switch nd.n {
	case 0:
		nd.ent, nd.n = e, 1
		t.entries++
		return true
	case 1:
		if nd.ent>>4 == id {
			nd.ent = e
			return false
		}
		s := t.newSet()
		t.sets[s].list = append(t.sets[s].list[:0], min(nd.ent, e), max(nd.ent, e))
		nd.ent, nd.n = s, 2
		t.entries++
		return true
	}
	ws := &t.sets[nd.ent]
	if tb := ws.bits; tb != nil {
		w, m := int(id>>6), uint64(1)<<(id&63)
		tb.any = grow(tb.any, w)
		was := tb.any[w]&m != 0
		tb.any[w] |= m
		for tt := range tb.tier {
			if b&(1<<tt) != 0 {
				tb.tier[tt] = grow(tb.tier[tt], w)
				tb.tier[tt][w] |= m
			} else if w < len(tb.tier[tt]) {
				tb.tier[tt][w] &^= m
			}
		}
		if was {
			return false
		}
	} else {
		i, ok := searchID(ws.list, id)
		if ok {
			ws.list[i] = e
			return false
		}
		ws.list = slices.Insert(ws.list, i, e)
		if n := len(ws.list); n > t.cfg.SetBits && n >= 2*words(ws.list[n-1]>>4) {
			ws.toBits()
		}
	}
	nd.n++
	t.entries++
	return true
}

func grow(s []uint64, w int) []uint64 {
	if w < len(s) {
		return s
	}
	return append(s, make([]uint64, w+1-len(s))...)
}

// del drops stream id from block x; it reports whether it was there.
func (t *Tree) del(x, id uint32) bool {
	nd := t.node(x)
	switch nd.n {
	case 0:
		return false
	case 1:
		if nd.ent>>4 != id {
			return false
		}
		nd.ent, nd.n = 0, 0
		t.entries--
		return true
	}
	ws := &t.sets[nd.ent]
	if tb := ws.bits; tb != nil {
		w, m := int(id>>6), uint64(1)<<(id&63)
		if w >= len(tb.any) || tb.any[w]&m == 0 {
			return false
		}
		tb.any[w] &^= m
		for tt := range tb.tier {
			if w < len(tb.tier[tt]) {
				tb.tier[tt][w] &^= m
			}
		}
	} else {
		i, ok := searchID(ws.list, id)
		if !ok {
			return false
		}
		ws.list = slices.Delete(ws.list, i, i+1)
	}
	nd.n--
	t.entries--
	switch {
	case nd.n == 1:
		ws.toList()
		s, list := nd.ent, ws.list
		nd.ent = list[0]
		t.sets[s] = wset{}
		if cap(list) <= 8 {
			t.sets[s].list = list[:0] // kept for the next small set
		}
		t.freeS = append(t.freeS, s)
	case ws.bits != nil && (int(nd.n) <= t.cfg.SetBits/2 || int(nd.n) < len(ws.bits.any)):
		ws.toList()
	}
	return true
}

func (t *Tree) newSet() uint32 {
	if n := len(t.freeS); n > 0 {
		s := t.freeS[n-1]
		t.freeS = t.freeS[:n-1]
		return s
	}
	t.sets = append(t.sets, wset{})
	return uint32(len(t.sets) - 1)
}

func (ws *wset) toBits() {
	tb := &tierBits{any: make([]uint64, words(ws.list[len(ws.list)-1]>>4))}
	for _, e := range ws.list {
		w, m := int(e>>10), uint64(1)<<((e>>4)&63)
		tb.any[w] |= m
		for tt := range tb.tier {
			if e&(1<<tt) != 0 {
				tb.tier[tt] = grow(tb.tier[tt], w)
				tb.tier[tt][w] |= m
			}
		}
	}
	ws.list, ws.bits = nil, tb
}

func (ws *wset) toList() {
	tb := ws.bits
	if tb == nil {
		return
	}
	var n int
	for _, w := range tb.any {
		n += bits.OnesCount64(w)
	}
	list := make([]uint32, 0, n)
	for w, word := range tb.any {
		for word != 0 {
			i := uint32(w<<6 + bits.TrailingZeros64(word))
			word &= word - 1
			list = append(list, i<<4|uint32(tb.entryBits(i)))
		}
	}
	ws.list, ws.bits = list, nil
}

func (tb *tierBits) entryBits(id uint32) uint8 {
	w, m := int(id>>6), uint64(1)<<(id&63)
	var b uint8
	for tt := range tb.tier {
		if w < len(tb.tier[tt]) && tb.tier[tt][w]&m != 0 {
			b |= 1 << tt
		}
	}
	return b
}

// appendEntries appends block x's entries (id<<4 | tier bits), in id order.
func (t *Tree) appendEntries(buf []uint32, x uint32) []uint32 {
	nd := t.node(x)
	switch nd.n {
	case 0:
		return buf
	case 1:
		return append(buf, nd.ent)
	}
	ws := &t.sets[nd.ent]
	if ws.bits == nil {
		return append(buf, ws.list...)
	}
	for w, word := range ws.bits.any {
		for word != 0 {
			i := uint32(w<<6 + bits.TrailingZeros64(word))
			word &= word - 1
			buf = append(buf, i<<4|uint32(ws.bits.entryBits(i)))
		}
	}
	return buf
}
