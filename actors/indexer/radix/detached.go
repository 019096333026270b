package radix

import "github.com/kvrouter/kvrouter/messages"

// detached holds a stream's detached chains: blocks whose prefix the stream
// does not hold in the tree (see the package documentation). They are kept
// by engine hash, outside the tree, until their parent is stored (graft) or
// they are removed or cleared.
type detached struct {
	blocks map[messages.ExternalHash]detBlock
	// kids lists the detached blocks stored under each parent engine hash:
	// a detached block, or a hash the stream does not hold (a chain's root).
	kids map[messages.ExternalHash][]messages.ExternalHash
}

type detBlock struct {
	local  messages.LocalHash
	parent messages.ExternalHash
	tiers  uint8
}

func (d *detached) has(e messages.ExternalHash) bool {
	if d == nil {
		return false
	}
	_, ok := d.blocks[e]
	return ok
}

func (d *detached) addTier(e messages.ExternalHash, bit uint8) {
	b := d.blocks[e]
	b.tiers |= bit
	d.blocks[e] = b
}

func (d *detached) setTiers(e messages.ExternalHash, bits uint8) {
	b := d.blocks[e]
	b.tiers = bits
	d.blocks[e] = b
}

func (d *detached) size() int {
	if d == nil {
		return 0
	}
	return len(d.blocks)
}

// detach keeps block e (local hash l) detached under parent. It refuses a
// block that would close a cycle of engine hashes (e is the root parent of
// a detached chain above parent): only hand-made input can do that.
func (s *stream) detach(e messages.ExternalHash, l messages.LocalHash, parent messages.ExternalHash, bits uint8) bool {
	if s.det == nil {
		s.det = &detached{blocks: map[messages.ExternalHash]detBlock{}, kids: map[messages.ExternalHash][]messages.ExternalHash{}}
	}
	d := s.det
	if len(d.kids[e]) > 0 {
		for p := parent; ; {
			if p == e {
				return false
			}
			b, ok := d.blocks[p]
			if !ok {
				break
			}
			p = b.parent
		}
	}
	d.blocks[e] = detBlock{local: l, parent: parent, tiers: bits}
	d.kids[parent] = append(d.kids[parent], e)
	return true
}

// dropDetached drops detached block e and the detached blocks below it; it
// returns how many were dropped.
func (s *stream) dropDetached(e messages.ExternalHash) int {
	d := s.det
	p := d.blocks[e].parent
	kids := d.kids[p]
	for i, k := range kids {
		if k == e {
			kids = append(kids[:i], kids[i+1:]...)
			break
		}
	}
	if len(kids) == 0 {
		delete(d.kids, p)
	} else {
		d.kids[p] = kids
	}
	n, stack := 0, []messages.ExternalHash{e}
	for len(stack) > 0 {
		y := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := d.blocks[y]; !ok {
			continue
		}
		delete(d.blocks, y)
		n++
		stack = append(stack, d.kids[y]...)
		delete(d.kids, y)
	}
	if len(d.blocks) == 0 {
		s.det = nil
	}
	return n
}

// graft attaches the detached blocks below engine hash e, which the stream
// now holds as tree block x.
func (t *Tree) graft(s *stream, e messages.ExternalHash, x uint32, o *Outcome) {
	d := s.det
	if len(d.kids[e]) == 0 {
		return
	}
	type item struct {
		e messages.ExternalHash
		x uint32
	}
	queue, n := []item{{e, x}}, 0
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		kids := d.kids[it.e]
		delete(d.kids, it.e)
		for _, c := range kids {
			b, ok := d.blocks[c]
			if !ok {
				continue
			}
			delete(d.blocks, c)
			y := t.child(it.x, b.local)
			t.hold(s, y, c, b.tiers, o)
			queue = append(queue, item{c, y})
			n++
		}
	}
	t.note(o, ReasonGrafted, n)
	if len(d.blocks) == 0 {
		s.det = nil
	}
}
