package sessions

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// The naive model: the rules of doc.go with slices, linear scans and no
// positions, indexes or compaction.

type mBlock struct {
	h         messages.ExternalHash
	parent    messages.ExternalHash // the hash it was stored under (hasParent)
	hasParent bool
	linked    bool // parent is in the lineage
	tiers     uint8
}

type mLin struct {
	key    messages.WorkerKey
	blocks []mBlock // live blocks, store order
	stamp  uint64
}

type mSess struct {
	id    string
	lins  []*mLin
	last  time.Time
	touch uint64 // LRU order
}

type model struct {
	cfg     Config
	sess    []*mSess
	seq     uint64
	tick    uint64
	reasons [ReasonCount]uint64
}

func (l *mLin) find(h messages.ExternalHash) int {
	for i, b := range l.blocks {
		if b.h == h {
			return i
		}
	}
	return -1
}

func (l *mLin) depth(i int) uint32 {
	d := uint32(1)
	for l.blocks[i].linked {
		i = l.find(l.blocks[i].parent)
		d++
	}
	return d
}

// root returns the segment start above i.
func (l *mLin) root(i int) int {
	for l.blocks[i].linked {
		i = l.find(l.blocks[i].parent)
	}
	return i
}

func (l *mLin) ancestorOrSelf(a, d int) bool {
	for {
		if d == a {
			return true
		}
		if !l.blocks[d].linked {
			return false
		}
		d = l.find(l.blocks[d].parent)
	}
}

func (m *model) session(id string) *mSess {
	for _, s := range m.sess {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (s *mSess) lin(key messages.WorkerKey) *mLin {
	if s == nil {
		return nil
	}
	for _, l := range s.lins {
		if l.key == key {
			return l
		}
	}
	return nil
}

func (m *model) lru() *mSess {
	var v *mSess
	for _, s := range m.sess {
		if v == nil || s.touch < v.touch {
			v = s
		}
	}
	return v
}

func (m *model) touch(s *mSess) { m.tick++; s.touch = m.tick }

func (m *model) dropSession(s *mSess) {
	m.sess = slices.DeleteFunc(m.sess, func(t *mSess) bool { return t == s })
}

// tidy drops empty lineages and sessions.
func (m *model) tidy() {
	for _, s := range m.sess {
		s.lins = slices.DeleteFunc(s.lins, func(l *mLin) bool { return len(l.blocks) == 0 })
	}
	m.sess = slices.DeleteFunc(m.sess, func(s *mSess) bool { return len(s.lins) == 0 })
}

func (m *model) total() int {
	n := 0
	for _, s := range m.sess {
		for _, l := range s.lins {
			n += len(l.blocks)
		}
	}
	return n
}

func (m *model) expire(now time.Time) {
	if m.cfg.IdleTTL < 0 {
		return
	}
	for s := m.lru(); s != nil && !now.Before(s.last.Add(m.cfg.IdleTTL)); s = m.lru() {
		m.dropSession(s)
		m.reasons[ReasonExpired]++
	}
}

func (m *model) linsOn(key messages.WorkerKey) []*mLin {
	var out []*mLin
	for _, s := range m.sess {
		if l := s.lin(key); l != nil {
			out = append(out, l)
		}
	}
	return out
}

func (m *model) addTier(key messages.WorkerKey, h messages.ExternalHash, tier uint8) {
	for _, l := range m.linsOn(key) {
		if i := l.find(h); i >= 0 {
			l.blocks[i].tiers |= tier
		}
	}
}

// cascade drops blocks whose linked parent is gone, to a fixpoint.
func (m *model) cascade(l *mLin) {
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(l.blocks); i++ {
			if b := l.blocks[i]; b.linked && l.find(b.parent) < 0 {
				l.blocks = slices.Delete(l.blocks, i, i+1)
				m.reasons[ReasonPruned]++
				changed = true
				i--
			}
		}
	}
}

func (m *model) apply(ev messages.RouterEvent, now time.Time) {
	m.expire(now)
	key := messages.WorkerKey{Worker: ev.WorkerID, DpRank: ev.Event.DpRank}
	tier := tierBit(ev.StorageTier)
	switch ev.Event.Kind {
	case messages.KindStored:
		m.store(key, tier, ev, now)
	case messages.KindRemoved:
		for _, h := range ev.Event.Removed {
			for _, l := range m.linsOn(key) {
				i := l.find(h)
				if i < 0 || l.blocks[i].tiers&tier == 0 {
					continue
				}
				l.blocks[i].tiers &^= tier
				if l.blocks[i].tiers == 0 {
					l.blocks = slices.Delete(l.blocks, i, i+1)
					m.reasons[ReasonPruned]++
					m.cascade(l)
				}
			}
		}
	case messages.KindCleared:
		m.clearKey(key)
	case messages.KindOffloaded:
		for _, h := range ev.Event.Offloaded {
			m.addTier(key, h, tier)
		}
	}
	m.tidy()
}

func (m *model) clearKey(key messages.WorkerKey) {
	for _, l := range m.linsOn(key) {
		l.blocks = nil
		m.reasons[ReasonCleared]++
	}
	m.tidy()
}

func (m *model) store(key messages.WorkerKey, tier uint8, ev messages.RouterEvent, now time.Time) {
	for _, b := range ev.Event.Blocks {
		m.addTier(key, b.BlockHash, tier)
	}
	id := ev.SessionID
	if id == "" || id == "__dynamo_unattributed__" {
		m.reasons[ReasonUnattributed]++
		return
	}
	if len(id) > m.cfg.MaxIDLen || strings.IndexFunc(id, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		m.reasons[ReasonInvalidSessionID]++
		return
	}
	s := m.session(id)
	l := s.lin(key)
	prev, hasPrev, prevIdx := ev.Event.ParentHash, ev.Event.HasParent, -1
	if hasPrev && len(ev.Event.Blocks) > 0 {
		if l != nil {
			prevIdx = l.find(prev)
		}
		if prevIdx < 0 {
			m.reasons[ReasonUnknownParent]++
		}
	}
	touched, appended := false, false
	for _, b := range ev.Event.Blocks {
		h := b.BlockHash
		if hasPrev && h == prev {
			m.reasons[ReasonCycle]++
			break
		}
		if i := -1; l != nil {
			i = l.find(h)
			if i >= 0 {
				e := l.blocks[i]
				if e.hasParent == hasPrev && (!hasPrev || e.parent == prev) {
					touched = true
					prev, hasPrev, prevIdx = h, true, i
					continue
				}
				if prevIdx >= 0 && l.ancestorOrSelf(i, prevIdx) {
					m.reasons[ReasonCycle]++
				} else {
					m.reasons[ReasonConflictingParent]++
				}
				break
			}
		}
		if prevIdx >= 0 {
			if r := l.blocks[l.root(prevIdx)]; r.hasParent && r.parent == h {
				m.reasons[ReasonCycle]++
				break
			}
		}
		if l == nil {
			if s == nil {
				s = &mSess{id: id, last: now}
				m.sess = append(m.sess, s)
				m.touch(s)
				for len(m.sess) > m.cfg.MaxSessions {
					m.reasons[ReasonEvicted]++
					m.dropSession(m.lru())
				}
			} else {
				m.touch(s)
			}
			if len(s.lins) >= m.cfg.MaxHolders {
				old := s.lins[0]
				for _, o := range s.lins {
					if o.stamp < old.stamp {
						old = o
					}
				}
				m.reasons[ReasonHolderDropped]++
				s.lins = slices.DeleteFunc(s.lins, func(o *mLin) bool { return o == old })
			}
			l = &mLin{key: key}
			s.lins = append(s.lins, l)
		}
		l.blocks = append(l.blocks, mBlock{h: h, parent: prev, hasParent: hasPrev, linked: prevIdx >= 0, tiers: tier})
		prev, hasPrev, prevIdx = h, true, len(l.blocks)-1
		touched, appended = true, true
	}
	if !touched {
		return
	}
	s.last = now
	m.touch(s)
	if appended {
		m.seq++
		l.stamp = m.seq
		if len(l.blocks) > m.cfg.MaxDepth {
			n := len(l.blocks) - (m.cfg.MaxDepth - m.cfg.MaxDepth/8)
			l.blocks = slices.Delete(l.blocks, 0, n)
			m.reasons[ReasonDepthDropped] += uint64(n)
			for i := range l.blocks {
				if b := &l.blocks[i]; b.linked && l.find(b.parent) < 0 {
					b.linked = false
				}
			}
		}
	}
	for m.total() > m.cfg.MaxBlocks {
		v := m.lru()
		if v == s {
			break
		}
		m.reasons[ReasonEvicted]++
		m.dropSession(v)
	}
}

func (m *model) forget(id string) bool {
	s := m.session(id)
	if s != nil {
		m.dropSession(s)
	}
	return s != nil
}

func (m *model) holders(id string) []hs {
	s := m.session(id)
	if s == nil {
		return nil
	}
	lins := slices.Clone(s.lins)
	slices.SortFunc(lins, func(a, b *mLin) int { return int(b.stamp) - int(a.stamp) })
	out := make([]hs, len(lins))
	for i, l := range lins {
		n := len(l.blocks) - 1
		out[i] = hs{l.key, l.depth(n), len(l.blocks), l.blocks[n].h}
	}
	return out
}

// TestModel drives the index and the model with the same random events
// (fixed seeds) and compares holders, gauges and counters after each.
func TestModel(t *testing.T) {
	configs := []Config{
		{MaxSessions: 3, MaxDepth: 6, MaxHolders: 2, MaxBlocks: 20, IdleTTL: 50 * time.Second, MaxIDLen: 8},
		{MaxSessions: 8, MaxDepth: 16, MaxHolders: 4, MaxBlocks: 200, IdleTTL: 30 * time.Second, MaxIDLen: 8},
		{MaxSessions: 64, MaxDepth: 64, MaxHolders: 8, MaxBlocks: 1 << 20, IdleTTL: -1, MaxIDLen: 8},
		{MaxSessions: 2, MaxDepth: 1, MaxHolders: 1, MaxBlocks: 3, IdleTTL: 20 * time.Second, MaxIDLen: 8},
	}
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	steps := 3000
	if testing.Short() {
		seeds, steps = seeds[:2], 1000
	}
	for ci, cfg := range configs {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("cfg%d/seed%d", ci, seed), func(t *testing.T) {
				runModel(t, New(cfg), rand.New(rand.NewPCG(seed, uint64(ci))), steps, nil)
			})
		}
	}
}

// TestModelPositionsWrap is TestModel with every lineage's absolute
// positions moved close to 2^posBits every 100 steps (the owner slots
// rebuilt to match), so that trims carry them across the wrap.
func TestModelPositionsWrap(t *testing.T) {
	cfg := Config{MaxSessions: 8, MaxDepth: 16, MaxHolders: 4, MaxBlocks: 200, IdleTTL: 30 * time.Second, MaxIDLen: 8}
	for _, seed := range []uint64{1, 2, 3} {
		runModel(t, New(cfg), rand.New(rand.NewPCG(seed, 99)), 2000, func(step int, x *Index) {
			if step%100 != 0 {
				return
			}
			for _, st := range x.streams {
				for _, l := range st.lins {
					if l != nil {
						l.base = posMask - uint32(len(l.hashes)+step%7)
					}
				}
				st.owners.slots, st.owners.size, st.owners.tomb = nil, 0, 0 // n stays: the rebuild sizes from it
				st.reserve()
			}
		})
	}
}

// runModel drives x and a model with the same random events and compares
// holders, gauges and counters after each; every, when set, runs before
// each step.
func runModel(t *testing.T, x *Index, rng *rand.Rand, steps int, every func(step int, x *Index)) {
	t.Helper()
	ids := []string{"a", "b", "c", "d", "e", "", "bad id", "toolong-id", "__dynamo_unattributed__"}
	keys := []messages.WorkerKey{wk(1, 0), wk(1, 1), wk(2, 0), wk(3, 0)}
	m := &model{cfg: x.Config()}
	now := t0
	for step := range steps {
		if every != nil {
			every(step, x)
		}
		key := keys[rng.IntN(len(keys))]
		hash := func() uint64 { return uint64(rng.IntN(40)) }
		var ev messages.RouterEvent
		switch op := rng.IntN(100); {
		case op < 60:
			id := ids[rng.IntN(len(ids))]
			parent := int64(noParent)
			switch p := rng.IntN(5); {
			case p < 2: // continue the session's newest block there
				if l := m.session(id).lin(key); l != nil {
					parent = int64(l.blocks[len(l.blocks)-1].h)
				}
			case p < 3: // fork from any of its blocks
				if l := m.session(id).lin(key); l != nil {
					parent = int64(l.blocks[rng.IntN(len(l.blocks))].h)
				}
			case p < 4:
				parent = int64(hash())
			}
			hs := make([]uint64, 1+rng.IntN(5))
			for i := range hs {
				hs[i] = hash()
			}
			ev = onTier(st(uint64(key.Worker), uint32(key.DpRank), id, parent, hs...), messages.StorageTier(rng.IntN(3)))
		case op < 80:
			hs := make([]uint64, 1+rng.IntN(4))
			for i := range hs {
				hs[i] = hash()
			}
			ev = onTier(rm(uint64(key.Worker), uint32(key.DpRank), hs...), messages.StorageTier(rng.IntN(3)))
		case op < 85:
			ev = onTier(offl(uint64(key.Worker), uint32(key.DpRank), hash(), hash()), messages.StorageTier(rng.IntN(3)))
		case op < 88:
			ev = clr(uint64(key.Worker), uint32(key.DpRank))
		case op < 91:
			id := ids[rng.IntN(len(ids))]
			if a, b := x.Forget(id), m.forget(id); a != b {
				t.Fatalf("step %d: Forget(%q) %v, model %v", step, id, a, b)
			}
			continue
		case op < 92:
			w := messages.WorkerID(1 + rng.IntN(3))
			x.DropWorker(w)
			for _, k := range keys {
				if k.Worker == w {
					m.clearKey(k)
				}
			}
			continue
		default:
			now = now.Add(time.Duration(rng.IntN(10)) * time.Second)
			continue
		}
		x.Apply(ev, now)
		m.apply(ev, now)
		checkInvariants(t, x)
		for _, id := range ids {
			if got, want := summary(x.Holders(id)), m.holders(id); !slices.Equal(got, want) {
				t.Fatalf("step %d (%+v): session %q holders %v, model %v", step, ev, id, got, want)
			}
		}
		stats := x.Stats()
		if stats.Reasons != m.reasons || stats.Sessions != len(m.sess) || stats.Blocks != m.total() {
			t.Fatalf("step %d (%+v): stats %+v\nmodel reasons %v sessions %d blocks %d", step, ev, stats, m.reasons, len(m.sess), m.total())
		}
	}
	t.Logf("%+v", x.Stats())
}
