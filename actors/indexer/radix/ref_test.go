package radix

import (
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// refModel is the naive reference for the differential test: per stream a
// map of engine hash → block with its parent's engine hash. Attachment,
// descendants and matches are recomputed from scratch every time.
type refModel struct {
	streams map[messages.WorkerKey]*refStream
	counts  [ReasonCount]uint64
}

type refStream struct {
	last   uint64
	blocks map[messages.ExternalHash]*refBlock
}

type refBlock struct {
	local  messages.LocalHash
	parent messages.ExternalHash
	root   bool
	tiers  uint8
}

func newRef() *refModel { return &refModel{streams: map[messages.WorkerKey]*refStream{}} }

func (m *refModel) note(o *Outcome, r Reason, n int) {
	if n > 0 {
		m.counts[r] += uint64(n)
		o.Reasons |= 1 << r
	}
}

// attached reports whether e is held and its parent chain reaches the root.
func (s *refStream) attached(e messages.ExternalHash) bool {
	for range len(s.blocks) + 1 {
		b := s.blocks[e]
		if b == nil {
			return false
		}
		if b.root {
			return true
		}
		e = b.parent
	}
	return false
}

// path returns e's local-hash path from the root (e attached).
func (s *refStream) path(e messages.ExternalHash) []messages.LocalHash {
	var p []messages.LocalHash
	for {
		b := s.blocks[e]
		p = append(p, b.local)
		if b.root {
			break
		}
		e = b.parent
	}
	slices.Reverse(p)
	return p
}

func (s *refStream) attachedCount() int {
	n := 0
	for e := range s.blocks {
		if s.attached(e) {
			n++
		}
	}
	return n
}

// drop deletes e and every block whose parent chain passes through it.
func (s *refStream) drop(e messages.ExternalHash) int {
	gone := map[messages.ExternalHash]bool{e: true}
	for changed := true; changed; {
		changed = false
		for h, b := range s.blocks {
			if !gone[h] && !b.root && gone[b.parent] {
				gone[h], changed = true, true
			}
		}
	}
	for h := range gone {
		delete(s.blocks, h)
	}
	return len(gone)
}

func (m *refModel) apply(ev messages.RouterEvent) Outcome {
	var o Outcome
	k := messages.WorkerKey{Worker: ev.WorkerID, DpRank: ev.Event.DpRank}
	s := m.streams[k]
	id := ev.Event.EventID
	if s != nil && id != 0 && id <= s.last {
		m.note(&o, ReasonStale, 1)
		return o
	}
	if s == nil {
		s = &refStream{blocks: map[messages.ExternalHash]*refBlock{}}
		m.streams[k] = s
	}
	if id == 0 {
		m.note(&o, ReasonUnsequenced, 1)
	} else {
		if id > s.last+1 {
			m.note(&o, ReasonIDGap, 1)
		}
		s.last = id
	}
	bit := uint8(1) << (ev.StorageTier & 7)
	switch {
	case ev.Event.Kind == messages.KindCleared:
		s.blocks = map[messages.ExternalHash]*refBlock{}
	case ev.StorageTier > messages.TierExternal:
		m.note(&o, ReasonInvalid, 1)
		return o
	case ev.Event.Kind == messages.KindStored:
		before := s.attachedCount()
		created := 0
		cur, root := ev.Event.ParentHash, !ev.Event.HasParent
		if !root {
			if b := s.blocks[cur]; b == nil {
				m.note(&o, ReasonParentNotFound, 1)
			} else if !s.attached(cur) {
				m.note(&o, ReasonDetachedParent, 1)
			}
		}
		for _, b := range ev.Event.Blocks {
			if old := s.blocks[b.BlockHash]; old != nil {
				old.tiers |= bit
				m.note(&o, ReasonDuplicateStore, 1)
			} else {
				s.blocks[b.BlockHash] = &refBlock{local: b.TokensHash, parent: cur, root: root, tiers: bit}
				if s.attached(b.BlockHash) {
					created++
				}
			}
			cur, root = b.BlockHash, false
		}
		m.note(&o, ReasonGrafted, s.attachedCount()-before-created)
	case ev.Event.Kind == messages.KindRemoved:
		for _, h := range ev.Event.Removed {
			b := s.blocks[h]
			switch {
			case b == nil:
				m.note(&o, ReasonUnknownRemoved, 1)
			case b.tiers&bit == 0:
				m.note(&o, ReasonTierNotHeld, 1)
			case b.tiers != bit:
				b.tiers &^= bit
			default:
				m.note(&o, ReasonCascaded, s.drop(h)-1)
			}
		}
	default:
		m.note(&o, ReasonInvalid, 1)
		return o
	}
	o.Applied = true
	return o
}

func (m *refModel) placeholder(k messages.WorkerKey, tier messages.StorageTier, hashes []messages.ExternalHash) (res, unres int) {
	s := m.streams[k]
	for _, h := range hashes {
		if s != nil && tier <= messages.TierExternal && s.blocks[h] != nil {
			s.blocks[h].tiers |= 1 << tier
			res++
		} else {
			unres++
		}
	}
	m.counts[ReasonPlaceholderResolved] += uint64(res)
	m.counts[ReasonPlaceholderUnresolved] += uint64(unres)
	return res, unres
}

func (m *refModel) blocks(k messages.WorkerKey) []messages.ExternalHash {
	s := m.streams[k]
	if s == nil {
		return nil
	}
	out := make([]messages.ExternalHash, 0, len(s.blocks))
	for h := range s.blocks {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// match returns the sorted scores and frequencies for query q, with tree
// sizes and tiers, without early exit.
func (m *refModel) match(q []messages.LocalHash) ([]Score, []uint32) {
	var scores []Score
	var freq []uint32
	for k, s := range m.streams {
		depth := map[int]messages.ExternalHash{} // matched depth → block at that depth
		for h := range s.blocks {
			if !s.attached(h) {
				continue
			}
			p := s.path(h)
			if len(p) <= len(q) && slices.Equal(p, q[:len(p)]) {
				depth[len(p)] = h
			}
		}
		n := 0
		for hasKey(depth, n+1) {
			n++
		}
		if n == 0 {
			continue
		}
		sc := Score{Key: k, Blocks: uint32(n), TreeSize: uint32(len(s.blocks))}
		for d := 1; d <= n; d++ {
			sc.Tiers[fastest(s.blocks[depth[d]].tiers)]++
		}
		scores = append(scores, sc)
		for len(freq) < n {
			freq = append(freq, 0)
		}
		for d := range n {
			freq[d]++
		}
	}
	slices.SortFunc(scores, func(a, b Score) int { return compareKeys(a.Key, b.Key) })
	return scores, freq
}

// withOptions narrows a full match to what opt asks for.
func withOptions(full []Score, freq []uint32, opt MatchOptions) ([]Score, []uint32) {
	out := make([]Score, len(full))
	for i, sc := range full {
		out[i] = Score{Key: sc.Key, Blocks: sc.Blocks}
		if opt.EarlyExit {
			out[i].Blocks = 1
		}
		if opt.TreeSizes {
			out[i].TreeSize = sc.TreeSize
		}
		if opt.Tiers {
			out[i].Tiers = sc.Tiers
		}
	}
	if opt.EarlyExit && len(freq) > 1 {
		freq = freq[:1]
	}
	if !opt.Frequencies {
		freq = nil
	}
	return out, freq
}

func hasKey(m map[int]messages.ExternalHash, k int) bool { _, ok := m[k]; return ok }
