package coalescer

import (
	"github.com/kvrouter/kvrouter/actors/internal/hashtab"
	"github.com/kvrouter/kvrouter/messages"
)

// Reference counts are kept per (tier, engine hash): a block offloaded to
// host memory is stored twice (device and host) under one engine hash, and
// the device copy's remove must still pass.
//
// Nearly every live hash is stored once, on the device tier: those hashes
// are a set (once, 8-byte slots; a store is one insert that says whether
// the hash was new). Every other hash maps to one word holding a 16-bit
// count for each of the four tiers (refs). A hash is in at most one of the
// two, and in once exactly when its counts are one device store and
// nothing else.
//
// Anything the table cannot count errs towards letting removes through,
// which can only drop a block the engine still holds in a duplicate (a lost
// hit), never keep one it evicted: a tier outside the four known ones is not
// counted, a count saturates at 0xffff (further stores are not counted), and
// a new hash is not counted while the table holds MaxTrackedBlocks hashes.
// All of these are counted in Stats.Untracked.

const (
	refBits  = 16
	refMask  = 1<<refBits - 1
	refTiers = 64 / refBits
	// onceCounts is the counts word of a hash in once: one device store.
	onceCounts = 1 << (refBits * uint(messages.TierDevice))
)

// refTable is a Stream's reference counts. The zero value is empty: refs
// is made by the first hash counted otherwise than once, so a stream
// whose hashes are all stored once never has one.
type refTable struct {
	once hashtab.Map[messages.ExternalHash, struct{}]
	refs map[messages.ExternalHash]uint64
}

func (t *refTable) len() int { return t.once.Len() + len(t.refs) }

// holds reports whether h has a live store on some tier.
func (t *refTable) holds(h messages.ExternalHash) bool {
	_, ok := t.refs[h]
	return ok || t.once.Has(h)
}

// counts returns h's counts word (0: not counted).
func (t *refTable) counts(h messages.ExternalHash) uint64 {
	if c, ok := t.refs[h]; ok {
		return c
	}
	if t.once.Has(h) {
		return onceCounts
	}
	return 0
}

// set stores h's counts word in the representation it belongs to.
func (t *refTable) set(h messages.ExternalHash, c uint64) {
	switch c {
	case 0:
		t.once.Delete(h)
		delete(t.refs, h)
	case onceCounts:
		delete(t.refs, h)
		t.once.Put(h, struct{}{})
	default:
		t.once.Delete(h)
		if t.refs == nil {
			t.refs = make(map[messages.ExternalHash]uint64)
		}
		t.refs[h] = c
	}
}

// ref counts one more live store of h on tier.
func (s *Stream) ref(tier messages.StorageTier, h messages.ExternalHash) {
	if tier >= refTiers {
		s.stats.Untracked++
		return
	}
	t := &s.refs
	if _, counted := t.refs[h]; !counted && tier == messages.TierDevice && t.len() < s.maxTracked {
		// The common case in one insert (refs is nearly always empty): a
		// new hash joins once; one already there goes on to be counted
		// twice.
		if t.once.Put(h, struct{}{}) {
			return
		}
	}
	shift := refBits * uint(tier)
	c := t.counts(h)
	if (c == 0 && t.len() >= s.maxTracked) || (c>>shift)&refMask == refMask {
		s.stats.Untracked++
		return
	}
	t.set(h, c+1<<shift)
}

// unref drops one live store of h on tier and reports whether the remove
// must reach the index: the last counted store went, or none was counted.
func (s *Stream) unref(tier messages.StorageTier, h messages.ExternalHash) bool {
	if tier >= refTiers {
		return true
	}
	shift := refBits * uint(tier)
	c := s.refs.counts(h)
	n := (c >> shift) & refMask
	if n > 0 {
		s.refs.set(h, c-1<<shift)
	}
	return n <= 1
}

// Tracked returns how many engine hashes the reference-count table holds (a
// gauge for metrics).
func (s *Stream) Tracked() int { return s.refs.len() }
