package coalescer

import "github.com/kvrouter/kvrouter/messages"

// Reference counts are kept per (tier, engine hash): a block offloaded to
// host memory is stored twice (device and host) under one engine hash, and
// the device copy's remove must still pass. The table maps an engine hash to
// one word holding a 16-bit count for each of the four tiers (a uint64-keyed
// map is several times faster than a struct-keyed one, and half the size).
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
)

// ref counts one more live store of h on tier.
func (s *Stream) ref(tier messages.StorageTier, h messages.ExternalHash) {
	if tier >= refTiers {
		s.stats.Untracked++
		return
	}
	shift := refBits * uint(tier)
	c, ok := s.refs[h]
	if (!ok && len(s.refs) >= s.maxTracked) || (c>>shift)&refMask == refMask {
		s.stats.Untracked++
		return
	}
	s.refs[h] = c + 1<<shift
}

// unref drops one live store of h on tier and reports whether the remove
// must reach the index: the last counted store went, or none was counted.
func (s *Stream) unref(tier messages.StorageTier, h messages.ExternalHash) bool {
	if tier >= refTiers {
		return true
	}
	shift := refBits * uint(tier)
	c := s.refs[h]
	switch (c >> shift) & refMask {
	case 0:
		return true
	case 1:
		if c -= 1 << shift; c == 0 {
			delete(s.refs, h)
		} else {
			s.refs[h] = c
		}
		return true
	default:
		s.refs[h] = c - 1<<shift
		return false
	}
}

// Tracked returns how many engine hashes the reference-count table holds (a
// gauge for metrics).
func (s *Stream) Tracked() int { return len(s.refs) }
