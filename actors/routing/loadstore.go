package routing

import "github.com/kvrouter/kvrouter/messages"

// The storage behind Load: request entries in a slice with a free list,
// threaded on intrusive lists (age order for eviction, deadline order per
// phase for expiry), and one stable slot per (worker, dp_rank) holding its
// sums.

type phase uint8

const (
	phaseFree phase = iota
	phasePrefill
	phaseDecode
)

const nilSlot = -1

// entry is one tracked request. It sits on two intrusive lists: the age
// list (Add order, for eviction) and its phase's deadline list (for Expire).
type entry struct {
	id            string
	slot          int32 // the rank's slot
	prefillTokens int64
	blocks        int64 // counted on the rank: held, or held × a decay fraction
	held          int64 // blocks the request holds: its prompt's plus its output blocks
	deadline      int64 // clock units (ns since the epoch)
	phase         phase
	agePrev       int32
	ageNext       int32
	ttlPrev       int32
	ttlNext       int32
}

type list struct{ head, tail int32 }

// rankSlot holds one rank's load. Slots are stable: a rank keeps its slot
// while it is idle, so Router can cache slot indices per candidate; idle
// slots are reclaimed in bulk (sweep) or when the worker is dropped.
type rankSlot struct {
	RankLoad
	live bool
}

// Slot reclamation: when a new rank needs a slot and at least
// sweepMinIdle live slots are idle and they are at least half of the live
// slots, every idle slot is freed. Amortised O(1) per Add.
const sweepMinIdle = 1024

// rankSlot returns key's slot, creating it (idle) if needed.
func (l *Load) rankSlot(key messages.WorkerKey) int32 {
	if i, ok := l.rankIdx[key]; ok {
		return i
	}
	if l.idle >= sweepMinIdle && 2*l.idle >= len(l.rankIdx) {
		for i := range l.slots {
			if s := &l.slots[i]; s.live && s.PrefillRequests+s.DecodeRequests == 0 {
				l.freeSlot(int32(i))
			}
		}
	}
	var i int32
	if n := len(l.freeRk); n > 0 {
		i = l.freeRk[n-1]
		l.freeRk = l.freeRk[:n-1]
	} else {
		l.slots = append(l.slots, rankSlot{})
		i = int32(len(l.slots) - 1)
	}
	l.slots[i] = rankSlot{RankLoad: RankLoad{Key: key}, live: true}
	l.rankIdx[key] = i
	l.idle++
	l.slotGen++
	return i
}

// freeSlot releases an idle slot.
func (l *Load) freeSlot(i int32) {
	delete(l.rankIdx, l.slots[i].Key)
	l.slots[i] = rankSlot{}
	l.freeRk = append(l.freeRk, i)
	l.idle--
}

// lookupSlot returns key's slot index or -1.
func (l *Load) lookupSlot(key messages.WorkerKey) int32 {
	if i, ok := l.rankIdx[key]; ok {
		return i
	}
	return -1
}

func (l *Load) alloc() int32 {
	if n := len(l.free); n > 0 {
		i := l.free[n-1]
		l.free = l.free[:n-1]
		return i
	}
	l.entries = append(l.entries, entry{})
	return int32(len(l.entries) - 1)
}

// remove unlinks entry i from everything and takes its load off its rank.
func (l *Load) remove(i int32) {
	e := &l.entries[i]
	r := &l.slots[e.slot]
	r.Blocks -= e.blocks
	if e.phase == phasePrefill {
		r.PrefillTokens -= e.prefillTokens
		r.PrefillRequests--
		l.unlinkTTL(&l.prefill, i)
	} else {
		r.DecodeRequests--
		l.unlinkTTL(&l.decode, i)
	}
	if r.PrefillRequests == 0 && r.DecodeRequests == 0 {
		l.idle++
	}
	l.unlinkAge(i)
	delete(l.ids, e.id)
	*e = entry{}
	l.free = append(l.free, i)
}

func (l *Load) pushAge(i int32) {
	e := &l.entries[i]
	e.agePrev = l.age.tail
	if l.age.tail != nilSlot {
		l.entries[l.age.tail].ageNext = i
	} else {
		l.age.head = i
	}
	l.age.tail = i
}

func (l *Load) unlinkAge(i int32) {
	e := &l.entries[i]
	if e.agePrev != nilSlot {
		l.entries[e.agePrev].ageNext = e.ageNext
	} else {
		l.age.head = e.ageNext
	}
	if e.ageNext != nilSlot {
		l.entries[e.ageNext].agePrev = e.agePrev
	} else {
		l.age.tail = e.agePrev
	}
	e.agePrev, e.ageNext = nilSlot, nilSlot
}

func (l *Load) pushTTL(ls *list, i int32) {
	e := &l.entries[i]
	e.ttlPrev, e.ttlNext = ls.tail, nilSlot
	if ls.tail != nilSlot {
		l.entries[ls.tail].ttlNext = i
	} else {
		ls.head = i
	}
	ls.tail = i
}

func (l *Load) unlinkTTL(ls *list, i int32) {
	e := &l.entries[i]
	if e.ttlPrev != nilSlot {
		l.entries[e.ttlPrev].ttlNext = e.ttlNext
	} else {
		ls.head = e.ttlNext
	}
	if e.ttlNext != nilSlot {
		l.entries[e.ttlNext].ttlPrev = e.ttlPrev
	} else {
		ls.tail = e.ttlPrev
	}
	e.ttlPrev, e.ttlNext = nilSlot, nilSlot
}
