package routing

import (
	"github.com/kvrouter/kvrouter/messages"
)

// resolveHints makes r.hints[i].slot the Load slot of cands[i] (or -1),
// reusing what the previous decisions found: with a stable candidate list
// this is one key comparison per candidate instead of a map lookup.
func (r *Router) resolveHints(cands []Candidate) []hint {
	n := len(cands)
	if cap(r.hints) < n {
		r.hints = make([]hint, n)
		for i := range r.hints {
			r.hints[i].slot = -2 // unknown
		}
	}
	hints := r.hints[:n]
	l := r.load
	slots := l.slots
	gen := l.slotGen
	for i := range cands {
		k, h := cands[i].Key, &hints[i]
		if h.key == k {
			if h.slot >= 0 && int(h.slot) < len(slots) && slots[h.slot].live && slots[h.slot].Key == k {
				continue
			}
			if h.slot == -1 && h.gen == gen {
				continue
			}
		}
		h.key, h.slot, h.gen = k, l.lookupSlot(k), gen
	}
	return hints
}

// resolveOverlaps returns the overlap of every candidate, aligned with
// cands, or nil when there is none: a linear scan for up to 8 overlaps,
// else a reused open-addressing table.
func (r *Router) resolveOverlaps(overlaps []Overlap, cands []Candidate) []uint32 {
	m := len(overlaps)
	if m == 0 {
		return nil
	}
	n := len(cands)
	if cap(r.ov) < n {
		r.ov = make([]uint32, n)
	}
	ov := r.ov[:n]
	if m <= 8 {
		// A 64-bit filter on the worker id skips most candidates without
		// touching the overlaps.
		var filter uint64
		for j := range overlaps {
			filter |= 1 << (uint64(overlaps[j].Key.Worker) & 63)
		}
		for i := range cands {
			k := cands[i].Key
			var best uint32
			if filter&(1<<(uint64(k.Worker)&63)) != 0 {
				for j := range overlaps {
					if overlaps[j].Key == k && overlaps[j].Blocks > best {
						best = overlaps[j].Blocks
					}
				}
			}
			ov[i] = best
		}
		return ov
	}
	t := &r.ovTab
	t.reset(m)
	for _, o := range overlaps {
		t.putMax(o.Key, o.Blocks)
	}
	for i := range cands {
		ov[i] = t.get(cands[i].Key)
	}
	return ov
}

// ovTable is an open-addressing (linear probing) map from key to overlap,
// cleared in O(1) by a stamp per slot.
type ovTable struct {
	keys  []messages.WorkerKey
	vals  []uint32
	stamp []uint32
	cur   uint32
	mask  uint64
}

// reset empties the table and sizes it for m keys (load ≤ 1/2).
func (t *ovTable) reset(m int) {
	size := 16
	for size < 2*m {
		size <<= 1
	}
	if len(t.keys) < size {
		t.keys = make([]messages.WorkerKey, size)
		t.vals = make([]uint32, size)
		t.stamp = make([]uint32, size)
		t.cur = 0
	}
	t.mask = uint64(size - 1)
	t.cur++
	if t.cur == 0 { // wrapped: stamps from 2^32 resets ago would look current
		clear(t.stamp)
		t.cur = 1
	}
}

func (t *ovTable) putMax(k messages.WorkerKey, v uint32) {
	for i := keyHash(k) & t.mask; ; i = (i + 1) & t.mask {
		if t.stamp[i] != t.cur {
			t.stamp[i], t.keys[i], t.vals[i] = t.cur, k, v
			return
		}
		if t.keys[i] == k {
			t.vals[i] = max(t.vals[i], v)
			return
		}
	}
}

func (t *ovTable) get(k messages.WorkerKey) uint32 {
	for i := keyHash(k) & t.mask; ; i = (i + 1) & t.mask {
		if t.stamp[i] != t.cur {
			return 0
		}
		if t.keys[i] == k {
			return t.vals[i]
		}
	}
}
