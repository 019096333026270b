package radix

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
)

// check verifies the tree's internal invariants.
func (t *Tree) check() error {
	held := make([]int, len(t.byID))
	live, entries := 0, 0
	stack := []uint32{0}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		nd := *t.node(x)
		if x != 0 {
			live++
			if nd.n == 0 {
				return fmt.Errorf("node %d: live and held by no stream", x)
			}
			es := t.appendEntries(nil, x)
			if len(es) != int(nd.n) {
				return fmt.Errorf("node %d: n=%d, %d entries", x, nd.n, len(es))
			}
			for i, e := range es {
				id := e >> 4
				if i > 0 && es[i-1]>>4 >= id {
					return fmt.Errorf("node %d: entries not sorted %v", x, es)
				}
				if e&tierMask == 0 {
					return fmt.Errorf("node %d: entry without tier", x)
				}
				if int(id) >= len(t.byID) || t.byID[id] == nil {
					return fmt.Errorf("node %d: entry of free id %d", x, id)
				}
				if t.bitsOf(x, id) != uint8(e&tierMask) {
					return fmt.Errorf("node %d: bitsOf disagrees", x)
				}
				if nd.parent != 0 && t.bitsOf(nd.parent, id) == 0 {
					return fmt.Errorf("node %d: stream %d holds it without its parent", x, id)
				}
				held[id]++
			}
			if nd.n >= 2 {
				ws := t.sets[nd.ent]
				if (ws.bits == nil) == (ws.list == nil) {
					return fmt.Errorf("node %d: set has both or neither forms", x)
				}
				if tb := ws.bits; tb != nil {
					for k := range tb.any {
						var or uint64
						for tt := range tb.tier {
							if k < len(tb.tier[tt]) {
								or |= tb.tier[tt][k]
							}
						}
						if or != tb.any[k] {
							return fmt.Errorf("node %d: any != OR(tiers)", x)
						}
					}
				}
			}
			entries += int(nd.n)
		}
		kids := t.appendChildren(nil, x)
		if nd.kids != 0 && len(kids) < 2 {
			return fmt.Errorf("node %d: kid set with %d children", x, len(kids))
		}
		if ks := t.kids[nd.kids]; nd.kids != 0 && ks.m == nil && !slices.IsSorted(ks.hashes) {
			return fmt.Errorf("node %d: kid list not sorted", x)
		}
		for _, c := range kids {
			if t.node(c).parent != x || t.findChild(x, t.node(c).hash) != c {
				return fmt.Errorf("node %d: child %d misfiled", x, c)
			}
		}
		stack = append(stack, kids...)
	}
	free := 0
	for x := t.freeN; x != 0; x = t.node(x).child {
		free++
	}
	if free != t.free {
		return fmt.Errorf("free list of %d, counted %d", free, t.free)
	}
	if live+free+1 != int(t.n) {
		return fmt.Errorf("live %d + free %d + root != %d nodes", live, free, t.n)
	}
	if entries != t.entries {
		return fmt.Errorf("entries %d, counted %d", entries, t.entries)
	}
	for k, s := range t.streams {
		if t.byID[s.id] != s || t.keys[s.id] != k || s.key != k {
			return fmt.Errorf("stream %v: id table", k)
		}
		if held[s.id] != s.size {
			return fmt.Errorf("stream %v: size %d, holds %d", k, s.size, held[s.id])
		}
		nodes := map[uint32]bool{}
		for _, v := range s.lookup.All() {
			if t.valid(s, v) {
				nodes[uint32(v)] = true
			}
		}
		if len(nodes) != s.size {
			return fmt.Errorf("stream %v: %d looked-up blocks, size %d", k, len(nodes), s.size)
		}
		if d := s.det; d != nil {
			if len(d.blocks) == 0 {
				return fmt.Errorf("stream %v: empty detached set kept", k)
			}
			n := 0
			for p, kids := range d.kids {
				if v, ok := s.lookup.Get(p); ok && t.valid(s, v) {
					return fmt.Errorf("stream %v: detached under tree block %x", k, p)
				}
				for _, c := range kids {
					if b, ok := d.blocks[c]; !ok || b.parent != p || b.tiers == 0 {
						return fmt.Errorf("stream %v: detached kid %x of %x", k, c, p)
					}
					n++
				}
			}
			if n != len(d.blocks) {
				return fmt.Errorf("stream %v: %d detached blocks, %d kids", k, len(d.blocks), n)
			}
		}
	}
	return nil
}

// snapshot describes every stream's blocks canonically: attached blocks by
// their local-hash path, detached ones by their parent.
func (t *Tree) snapshot() map[messages.WorkerKey]map[messages.ExternalHash]string {
	out := map[messages.WorkerKey]map[messages.ExternalHash]string{}
	for k, s := range t.streams {
		m := map[messages.ExternalHash]string{}
		for e, v := range s.lookup.All() {
			if !t.valid(s, v) {
				continue
			}
			var path []string
			for x := uint32(v); x != 0; x = t.node(x).parent {
				path = append(path, fmt.Sprint(uint64(t.node(x).hash)))
			}
			slices.Reverse(path)
			m[e] = fmt.Sprintf("A %s t%b", strings.Join(path, "/"), t.bitsOf(uint32(v), s.id))
		}
		if s.det != nil {
			for e, b := range s.det.blocks {
				m[e] = fmt.Sprintf("D %x %d t%b", uint64(b.parent), b.local, b.tiers)
			}
		}
		if len(m) > 0 {
			out[k] = m
		}
	}
	return out
}

func fastest(b uint8) int { return bits.TrailingZeros8(b) }
