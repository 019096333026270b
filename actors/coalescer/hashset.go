package coalescer

import (
	"math/bits"
	"math/rand/v2"

	"github.com/kvrouter/kvrouter/messages"
)

// hashSet is a set of engine hashes: open addressing with linear probing in
// one slice of 8-byte slots, at most 3/4 full (a Go map of the same hashes
// takes 16-byte slots plus control bytes, ~24 B a hash against ~14 here).
// Slot value 0 is empty; hash 0 is kept aside. Engine hashes are untrusted,
// so slots are chosen by a keyed mix: an engine cannot aim its hashes at
// one run of slots without knowing the set's random key. Insert reports
// whether the hash was new, in one probe sequence.
type hashSet struct {
	slots []messages.ExternalHash
	n     int    // hashes in slots
	key   uint64 // the mix's key
	zero  bool   // hash 0 is in the set
}

const hashSetMin = 8

func (s *hashSet) len() int {
	if s.zero {
		return s.n + 1
	}
	return s.n
}

// home is h's first slot.
func (s *hashSet) home(h messages.ExternalHash) int {
	hi, lo := bits.Mul64(uint64(h)^s.key, 0x9e3779b97f4a7c15)
	return int((hi ^ lo) & uint64(len(s.slots)-1))
}

// has reports whether h is in the set.
func (s *hashSet) has(h messages.ExternalHash) bool {
	if h == 0 {
		return s.zero
	}
	if s.n == 0 {
		return false
	}
	mask := len(s.slots) - 1
	for i := s.home(h); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// insert adds h and reports whether it was not there.
func (s *hashSet) insert(h messages.ExternalHash) bool {
	if h == 0 {
		added := !s.zero
		s.zero = true
		return added
	}
	if 4*(s.n+1) > 3*len(s.slots) {
		s.grow()
	}
	mask := len(s.slots) - 1
	for i := s.home(h); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return false
		case 0:
			s.slots[i] = h
			s.n++
			return true
		}
	}
}

// remove deletes h (a no-op when absent), shifting back the hashes of its
// run that would no longer be found past the emptied slot.
func (s *hashSet) remove(h messages.ExternalHash) {
	if h == 0 {
		s.zero = false
		return
	}
	if s.n == 0 {
		return
	}
	mask := len(s.slots) - 1
	i := s.home(h)
	for ; s.slots[i] != h; i = (i + 1) & mask {
		if s.slots[i] == 0 {
			return
		}
	}
	for j := (i + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		// The hash at j may fill the hole at i if its home is not in (i, j].
		if k := s.home(s.slots[j]); (j-k)&mask >= (j-i)&mask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = 0
	s.n--
}

func (s *hashSet) grow() {
	old := s.slots
	s.slots = make([]messages.ExternalHash, max(2*len(old), hashSetMin))
	if s.key == 0 {
		s.key = rand.Uint64() | 1
	}
	s.n = 0
	for _, h := range old {
		if h != 0 {
			s.insert(h)
		}
	}
}
