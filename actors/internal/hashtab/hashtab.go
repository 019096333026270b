// Package hashtab is the hash table the ingest path keeps per stream for
// engine hashes: the coalescer's set of hashes stored once and the index's
// engine hash → block lookup.
//
// A Map is open addressing with linear probing in one slice of slots (key
// and value side by side: a lookup is one cache line, and a miss followed by
// an insert of the same key finds that line warm), at most 7/8 full. A Go
// map of uint64 keys costs control bytes, groups and a table directory on
// top of its slots, and its probe is a call; on the ingest path every stored
// block misses in it once and is then inserted. Key 0 marks an empty slot,
// so a key 0 is kept aside. Engine hashes are untrusted, so slots are
// chosen by a keyed mix: an engine cannot aim its hashes at one run of
// slots without knowing the table's random key.
//
// A key's first slot is the top bits of its mix, so the order of the slots
// is the order of the mixed keys: doubling the table sends the keys of slot
// i to about slot 2i, and a growth reads the old slots and writes the new
// ones front to back (the hardware prefetches both) instead of one cache
// miss per key at a random slot.
//
// At most 7/8 full, doubling, a table is 7/16 to 7/8 full: its slots cost
// ~1.65 times their size per key over that range (~13 bytes for a set's
// 8-byte slots, ~26 for 16-byte ones), against ~1.9 times at the 3/4 it
// filled to before (in process, the tree 63–64 → 57–59 and the
// coalescers 16–18 → 13–16 bytes per (block, worker) entry:
// bench/README.md, "Where the memory goes"). The longer probes near 7/8
// cost the wire path nothing measurable (a probe's first slot is its
// cache miss, the rest its neighbours; BenchmarkWirePath, BenchmarkChurn
// and BenchmarkPush alternated before and after). Growing by half instead
// of doubling (any size, the home slot the mix scaled to it, still front
// to back) would save another ~15 % of the slots, but each key is then
// moved twice while a table grows instead of once: it cost 8 % of the
// wire path's rate from an empty index at 16 workers (14 % at 3/4), so
// tables double.
package hashtab

import (
	"iter"
	"math/bits"
	"math/rand/v2"
)

// minSlots is the size of a Map's first slot array.
const minSlots = 8

// full reports whether n keys pass the maximum load of size slots, 7/8.
func full(n, size int) bool { return 8*n > 7*size }

// Map maps uint64-like keys to values. The zero value is an empty map; it is
// not safe for concurrent use.
type Map[K ~uint64, V any] struct {
	slots []slot[K, V]
	n     int    // keys in slots
	seed  uint64 // the mix's key
	shift uint8  // 64 - log2(len(slots)): a mix's top bits pick the slot
	zero  bool   // key 0 is in the map, with value zeroV
	zeroV V
}

// slot puts the value first, so a set's zero-size value adds no padding.
type slot[K ~uint64, V any] struct {
	v V
	k K
}

// Len returns the number of keys.
func (m *Map[K, V]) Len() int {
	if m.zero {
		return m.n + 1
	}
	return m.n
}

// home is k's first slot.
func (m *Map[K, V]) home(k K) int {
	hi, lo := bits.Mul64(uint64(k)^m.seed, 0x9e3779b97f4a7c15)
	return int((hi ^ lo) >> m.shift)
}

// Get returns k's value and whether k is in the map.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if k == 0 {
		return m.zeroV, m.zero
	}
	if m.n == 0 {
		var v V
		return v, false
	}
	mask := len(m.slots) - 1
	for i := m.home(k); ; i = (i + 1) & mask {
		switch s := &m.slots[i]; s.k {
		case k:
			return s.v, true
		case 0:
			var v V
			return v, false
		}
	}
}

// Has reports whether k is in the map.
func (m *Map[K, V]) Has(k K) bool {
	_, ok := m.Get(k)
	return ok
}

// Touch loads k's first slot and returns its key. A lookup's cost is its
// cache miss: touching the keys of a run before looking them up starts
// their misses together (the CPU overlaps independent loads) instead of one
// after the other. The caller keeps the result (in a field) so the load is
// not dropped.
func (m *Map[K, V]) Touch(k K) K {
	if len(m.slots) == 0 {
		return 0
	}
	return m.slots[m.home(k)].k
}

// Put sets k's value and reports whether k was not in the map. It is
// Upsert's probe with the store inside it, not a call to Upsert: through
// the returned pointer the coalescer's set on the wire path ran ~5 % slower
// (BenchmarkWirePath, alternating runs).
func (m *Map[K, V]) Put(k K, v V) bool {
	if k == 0 {
		added := !m.zero
		m.zero, m.zeroV = true, v
		return added
	}
	if full(m.n+1, len(m.slots)) {
		m.grow()
	}
	mask := len(m.slots) - 1
	for i := m.home(k); ; i = (i + 1) & mask {
		switch s := &m.slots[i]; s.k {
		case k:
			s.v = v
			return false
		case 0:
			s.k, s.v = k, v
			m.n++
			return true
		}
	}
}

// Upsert returns k's value for the caller to set, adding k with the zero
// value when it is absent (added): a lookup that misses and the insert that
// follows it in one probe. The pointer is valid until the map next changes.
func (m *Map[K, V]) Upsert(k K) (v *V, added bool) {
	if k == 0 {
		added = !m.zero
		m.zero = true
		return &m.zeroV, added
	}
	if full(m.n+1, len(m.slots)) {
		m.grow()
	}
	mask := len(m.slots) - 1
	for i := m.home(k); ; i = (i + 1) & mask {
		switch s := &m.slots[i]; s.k {
		case k:
			return &s.v, false
		case 0:
			s.k = k
			m.n++
			return &s.v, true
		}
	}
}

// Delete removes k (a no-op when absent), shifting back the keys of its run
// that would no longer be found past the emptied slot.
func (m *Map[K, V]) Delete(k K) {
	var none V
	if k == 0 {
		m.zero, m.zeroV = false, none
		return
	}
	if m.n == 0 {
		return
	}
	mask := len(m.slots) - 1
	i := m.home(k)
	for ; m.slots[i].k != k; i = (i + 1) & mask {
		if m.slots[i].k == 0 {
			return
		}
	}
	for j := (i + 1) & mask; m.slots[j].k != 0; j = (j + 1) & mask {
		// The key at j may fill the hole at i if its home is not in (i, j].
		if h := m.home(m.slots[j].k); (j-h)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = slot[K, V]{k: 0, v: none}
	m.n--
}

// Clear removes every key, keeping the slot array for the keys to come.
func (m *Map[K, V]) Clear() {
	var none V
	clear(m.slots)
	m.n, m.zero, m.zeroV = 0, false, none
}

// All yields every key and value, in no particular order. The map must not
// change during the iteration (DeleteFunc deletes while walking).
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m.zero && !yield(0, m.zeroV) {
			return
		}
		for _, s := range m.slots {
			if s.k != 0 && !yield(s.k, s.v) {
				return
			}
		}
	}
}

// DeleteFunc deletes every key for which del returns true, rebuilding the
// slots at the size the remaining keys need.
func (m *Map[K, V]) DeleteFunc(del func(K, V) bool) {
	var none V
	if m.zero && del(0, m.zeroV) {
		m.zero, m.zeroV = false, none
	}
	old := m.slots
	m.slots, m.n = nil, 0
	kept := old[:0]
	for _, s := range old {
		if s.k != 0 && !del(s.k, s.v) {
			kept = append(kept, s) // in place: kept never passes the slot read
		}
	}
	if len(kept) == 0 {
		return
	}
	size := minSlots
	for full(len(kept), size) {
		size *= 2
	}
	m.resize(size, kept)
}

// quadrupleBelow is the slot count below which a Map grows fourfold
// instead of twofold (8, 32, 128, 512 slots, then doubling): a small
// table's growth is mostly its allocation, and a new stream's table passes
// the small sizes in half as many steps. A table of more than 112 keys has
// the size doubling would give it; a smaller one at most 512 slots.
const quadrupleBelow = 256

func (m *Map[K, V]) grow() {
	size := max(2*len(m.slots), minSlots)
	if len(m.slots) < quadrupleBelow {
		size = max(4*len(m.slots), minSlots)
	}
	m.resize(size, m.slots)
}

// resize moves the keys of from into a new slot array of size slots (a
// power of two). from is in slot order, so the writes move front to back.
func (m *Map[K, V]) resize(size int, from []slot[K, V]) {
	if m.seed == 0 {
		m.seed = rand.Uint64() | 1
	}
	m.slots, m.n = make([]slot[K, V], size), 0
	m.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	mask := size - 1
	for _, s := range from {
		if s.k == 0 {
			continue
		}
		i := m.home(s.k)
		for m.slots[i].k != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
		m.n++
	}
}
